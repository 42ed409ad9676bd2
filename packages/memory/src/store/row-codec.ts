/** Converts between store rows (snake_case columns) and records, shared by both stores. */

import type { MemoryCounts } from "../schemas/synthesis.ts";
import { MEMORY_SCOPE_VALUES, type MemoryScope } from "../scope/memory-scope.ts";
import type {
  IdempotencyRecord,
  StoredBlock,
  StoredDocument,
  StoredEvent,
  StoredJob,
  StoredMemory,
  StoredTrace,
} from "./memory-store.ts";
import { chargedMetadata } from "./tenant-usage.ts";

type Row = Record<string, unknown>;

export const scopeColumns = { userId: "user_id", agentId: "agent_id", sessionId: "session_id" } as const;

function json(value: unknown): unknown {
  if (typeof value === "string") return JSON.parse(value);
  return value;
}

function time(value: unknown): string | undefined {
  if (value === null || value === undefined) return undefined;
  return value instanceof Date ? value.toISOString() : String(value);
}

function optional<T>(key: string, value: T | null | undefined): Record<string, T> {
  return value === null || value === undefined ? {} : { [key]: value };
}

function scopeOf(row: Row): MemoryScope {
  const scope: Record<string, string> = {};
  for (const field of MEMORY_SCOPE_VALUES) {
    const value = row[scopeColumns[field]];
    if (typeof value === "string") scope[field] = value;
  }
  return scope;
}

/** The scope values in tuple order, nulls for absent fields (for INSERT parameters). */
export function scopeParameters(scope: MemoryScope): (string | null)[] {
  return MEMORY_SCOPE_VALUES.map((field) => scope[field] ?? null);
}

export function encodeEmbedding(embedding: Float32Array | undefined): Uint8Array | null {
  return embedding ? new Uint8Array(embedding.buffer, embedding.byteOffset, embedding.byteLength) : null;
}

function decodeEmbedding(value: unknown): Float32Array | undefined {
  if (!(value instanceof Uint8Array)) return undefined;
  const copy = new Uint8Array(value);
  return new Float32Array(copy.buffer, 0, copy.byteLength / 4);
}

export function memoryFromRow(row: Row): StoredMemory {
  const embedding = decodeEmbedding(row.embedding);
  return {
    id: String(row.id),
    tenantId: String(row.tenant_id),
    kind: row.kind as StoredMemory["kind"],
    content: String(row.content),
    ...scopeOf(row),
    metadata: json(row.metadata) as Record<string, unknown>,
    provenance: json(row.provenance) as StoredMemory["provenance"],
    version: Number(row.version),
    status: row.status as StoredMemory["status"],
    ...optional("supersededBy", row.superseded_by as string | null),
    importance: Number(row.importance),
    feedback: { helpful: Number(row.helpful), unhelpful: Number(row.unhelpful) },
    outcomes: { successes: Number(row.successes), failures: Number(row.failures) },
    accessCount: Number(row.access_count),
    ...optional("lastAccessedAt", time(row.last_accessed_at)),
    createdAt: time(row.created_at)!,
    updatedAt: time(row.updated_at)!,
    dedupeKey: String(row.dedupe_key),
    ...(embedding ? { embedding } : {}),
    ...optional("metadataCharge", row.metadata_bytes === undefined ? undefined : Number(row.metadata_bytes)),
  };
}

/**
 * Columns reads count in place (`recordAccess`: `access_count + 1`), outside a memory's version: an
 * update leaves them as they are, or it would write back what it read and lose the accesses between.
 */
const accessColumns: ReadonlySet<string> = new Set(["access_count", "last_accessed_at"]);

/** What an update of a memory writes: every column but its keys (id, tenant) and the access counts. */
export function memoryUpdate(
  memory: StoredMemory,
  scopeKeyValue: string,
): { columns: string[]; values: unknown[] } {
  const all = memoryValues(memory, scopeKeyValue);
  const columns: string[] = [];
  const values: unknown[] = [];
  memoryColumns.forEach((column, index) => {
    if (index < 2 || accessColumns.has(column)) return;
    columns.push(column);
    values.push(all[index]);
  });
  return { columns, values };
}

/** Column values of a memory, in the order of `memoryColumns`. */
export const memoryColumns = [
  "id",
  "tenant_id",
  "user_id",
  "agent_id",
  "session_id",
  "scope_key",
  "kind",
  "content",
  "dedupe_key",
  "metadata",
  "provenance",
  "version",
  "status",
  "superseded_by",
  "importance",
  "helpful",
  "unhelpful",
  "successes",
  "failures",
  "access_count",
  "last_accessed_at",
  "embedding",
  "created_at",
  "updated_at",
  "metadata_bytes",
] as const;

export function memoryValues(memory: StoredMemory, scopeKeyValue: string): unknown[] {
  return [
    memory.id,
    memory.tenantId,
    ...scopeParameters(memory),
    scopeKeyValue,
    memory.kind,
    memory.content,
    memory.dedupeKey,
    JSON.stringify(memory.metadata),
    JSON.stringify(memory.provenance),
    memory.version,
    memory.status,
    memory.supersededBy ?? null,
    memory.importance,
    memory.feedback.helpful,
    memory.feedback.unhelpful,
    memory.outcomes.successes,
    memory.outcomes.failures,
    memory.accessCount,
    memory.lastAccessedAt ?? null,
    encodeEmbedding(memory.embedding),
    memory.createdAt,
    memory.updatedAt,
    chargedMetadata(memory),
  ];
}

export function eventFromRow(row: Row): StoredEvent {
  return {
    id: String(row.id),
    tenantId: String(row.tenant_id),
    ...optional("customId", row.custom_id as string | null),
    role: row.role as StoredEvent["role"],
    content: String(row.content),
    ...scopeOf(row),
    metadata: json(row.metadata) as Record<string, unknown>,
    source: row.source as StoredEvent["source"],
    ...optional("importJobId", row.import_job_id as string | null),
    seq: Number(row.seq),
    occurredAt: time(row.occurred_at)!,
    createdAt: time(row.created_at)!,
    ...optional("metadataCharge", row.metadata_bytes === undefined ? undefined : Number(row.metadata_bytes)),
  };
}

export function idempotencyFromRow(row: Row): IdempotencyRecord {
  return {
    tenantId: String(row.tenant_id),
    key: String(row.key),
    fingerprint: String(row.fingerprint),
    ...optional("answer", row.answer as string | null),
    createdAt: time(row.created_at)!,
    expiresAt: time(row.expires_at)!,
  };
}

export function documentFromRow(row: Row): StoredDocument {
  return {
    id: String(row.id),
    tenantId: String(row.tenant_id),
    title: String(row.title),
    ...optional("source", row.source as string | null),
    ...scopeOf(row),
    metadata: json(row.metadata) as Record<string, unknown>,
    contentHash: String(row.content_hash),
    chunkCount: Number(row.chunk_count),
    createdAt: time(row.created_at)!,
  };
}

export function traceFromRow(row: Row): StoredTrace {
  return {
    id: String(row.id),
    tenantId: String(row.tenant_id),
    operation: row.operation as StoredTrace["operation"],
    query: String(row.query),
    ...scopeOf(row),
    ranking: row.ranking as StoredTrace["ranking"],
    results: json(row.results) as StoredTrace["results"],
    durationMs: Number(row.duration_ms),
    createdAt: time(row.created_at)!,
  };
}

export function jobFromRow(row: Row): StoredJob {
  return {
    id: String(row.id),
    tenantId: String(row.tenant_id),
    type: row.type as StoredJob["type"],
    status: row.status as StoredJob["status"],
    ...scopeOf(row),
    input: json(row.input),
    ...optional("result", row.result === null ? null : json(row.result)),
    ...optional("error", row.error === null ? null : (json(row.error) as StoredJob["error"])),
    createdAt: time(row.created_at)!,
    ...optional("startedAt", time(row.started_at)),
    ...optional("finishedAt", time(row.finished_at)),
  };
}

/** `AND user_id = ? AND ...` for every scope field given; `placeholder(n)` renders parameter n. */
export function scopeCondition(
  scope: MemoryScope,
  parameters: unknown[],
  placeholder: (index: number) => string,
  tableAlias = "",
): string {
  let sql = "";
  for (const field of MEMORY_SCOPE_VALUES) {
    const value = scope[field];
    if (value === undefined) continue;
    parameters.push(value);
    sql += ` AND ${tableAlias}${scopeColumns[field]} = ${placeholder(parameters.length)}`;
  }
  return sql;
}

export function blockFromRow(row: Row): StoredBlock {
  return {
    label: String(row.label),
    value: String(row.value),
    limit: Number(row.limit_chars),
    version: Number(row.version),
    updatedAt: row.updated_at instanceof Date ? row.updated_at.toISOString() : String(row.updated_at),
  };
}

/** Folds `(status, kind, n)` rows into the counts the API answers. */
export function countsFrom(rows: readonly Row[]): MemoryCounts {
  const counts = { active: 0, superseded: 0, archived: 0, deleted: 0, byKind: {} as Record<string, number> };
  for (const row of rows) {
    const n = Number(row.n);
    const status = String(row.status) as "active" | "superseded" | "archived" | "deleted";
    counts[status] += n;
    if (status === "active") counts.byKind[String(row.kind)] = (counts.byKind[String(row.kind)] ?? 0) + n;
  }
  return counts;
}

/** A `memory_history` row's values, in the order both stores insert its columns. */
export function historyValues(memory: StoredMemory, change: string, reason: string | undefined): unknown[] {
  return [
    memory.tenantId,
    memory.id,
    memory.version,
    change,
    memory.kind,
    memory.content,
    JSON.stringify(memory.metadata),
    memory.status,
    memory.importance,
    reason ?? null,
    memory.updatedAt,
  ];
}

const jsonOrNull = (value: unknown) => (value === undefined ? null : JSON.stringify(value));

/**
 * A job's values for `INSERT INTO memory_jobs (id, tenant_id, user_id, agent_id, session_id, type, status,
 * input, result, error, created_at, started_at, finished_at)`.
 */
export function jobValues(job: StoredJob): unknown[] {
  return [
    job.id,
    job.tenantId,
    ...scopeParameters(job),
    job.type,
    job.status,
    // A job stored finished (a scan run inline) keeps no input either (ADR 0551).
    job.status === "succeeded" || job.status === "failed" ? "null" : JSON.stringify(job.input),
    jsonOrNull(job.result),
    jsonOrNull(job.error),
    job.createdAt,
    job.startedAt ?? null,
    job.finishedAt ?? null,
  ];
}

/**
 * A job's values for `UPDATE memory_jobs SET status, result, error, started_at, finished_at WHERE tenant_id
 * AND id`, in that order.
 */
export function jobUpdateValues(job: StoredJob): unknown[] {
  return [
    job.status,
    jsonOrNull(job.result),
    jsonOrNull(job.error),
    job.startedAt ?? null,
    job.finishedAt ?? null,
    job.tenantId,
    job.id,
    // Written only while the job is not finished (a job set back to running has its input again).
    jsonOrNull(job.input),
  ];
}
