/**
 * Per-tenant storage quotas (ADR 0538): what a tenant has stored, kept in one counter row per tenant
 * (`memory_tenant_usage`) that every write and purge changes in its own transaction, and the check
 * that refuses a write whose counts would pass a limit (the transaction then rolls back whole).
 */
import { MemoryError } from "../errors/memory-error.ts";

/** What a tenant has stored, until purged. */
export interface TenantUsage {
  /** Memory rows of any status (a soft-deleted memory keeps its row and history until purged). */
  readonly memories: number;
  /** UTF-8 bytes of memory content over every version kept (each history row). */
  readonly memoryBytes: number;
  readonly events: number;
  /** UTF-8 bytes of event content. */
  readonly eventBytes: number;
  /** UTF-8 bytes of knowledge-document chunks. */
  readonly documentBytes: number;
  /**
   * UTF-8 bytes of metadata as JSON (ADR 0556): of every memory version kept, of events and of
   * documents. Each row keeps the bytes it was charged, so a recount agrees with what writes added.
   */
  readonly metadataBytes: number;
}

/** A limit per kind of usage; `Infinity` switches one off. */
export type UsageLimits = { readonly [Kind in keyof TenantUsage]: number };

export const usageKinds = [
  "memories",
  "memoryBytes",
  "events",
  "eventBytes",
  "documentBytes",
  "metadataBytes",
] as const;

export const usageColumns: { readonly [Kind in keyof TenantUsage]: string } = {
  memories: "memories",
  memoryBytes: "memory_bytes",
  events: "events",
  eventBytes: "event_bytes",
  documentBytes: "document_bytes",
  metadataBytes: "metadata_bytes",
};

export const zeroUsage: TenantUsage = {
  memories: 0,
  memoryBytes: 0,
  events: 0,
  eventBytes: 0,
  documentBytes: 0,
  metadataBytes: 0,
};

export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

/**
 * What a row's metadata is charged (ADR 0556): the UTF-8 bytes of the JSON text the store is given;
 * none at all for no metadata or an empty object (ADR 0559), so a tenant at its metadata limit can
 * still store what carries none.
 */
export function metadataBytes(metadata: unknown): number {
  if (metadata === undefined || metadata === null || isEmptyObject(metadata)) return 0;
  return utf8Bytes(JSON.stringify(metadata));
}

/**
 * What a row is charged for its metadata: its own `metadataCharge` when the service set one (ADR 0563:
 * metadata the service wrote itself costs nothing; a version keeping its metadata keeps the charge),
 * else `metadataBytes` of what it holds.
 */
export function chargedMetadata(row: WithMetadata): number {
  return row.metadataCharge ?? metadataBytes(row.metadata);
}

function isEmptyObject(value: unknown): boolean {
  return typeof value === "object" && !Array.isArray(value) && Object.keys(value as object).length === 0;
}

export function usageFromRow(row: Record<string, unknown> | undefined): TenantUsage {
  if (!row) return zeroUsage;
  return Object.fromEntries(usageKinds.map((kind) => [kind, Number(row[usageColumns[kind]] ?? 0)])) as never;
}

/** The upsert adding `delta` to the tenant's row and answering the row after it (`mark(n)`: parameter n). */
export function chargeUsageSql(mark: (n: number) => string): string {
  const columns = usageKinds.map((kind) => usageColumns[kind]);
  return `INSERT INTO memory_tenant_usage (tenant_id, ${columns.join(", ")})
    VALUES (${[1, ...columns.map((_, index) => index + 2)].map(mark).join(", ")})
    ON CONFLICT (tenant_id) DO UPDATE SET ${columns
      .map((column) => `${column} = memory_tenant_usage.${column} + excluded.${column}`)
      .join(", ")}
    RETURNING *`;
}

export function chargeUsageValues(tenantId: string, delta: Partial<TenantUsage>): unknown[] {
  return [tenantId, ...usageKinds.map((kind) => delta[kind] ?? 0)];
}

/** The tables whose rows carry metadata, each counted by the dialect as it was charged. */
export type MetadataTable = "memory_history" | "memory_memories" | "memory_events" | "memory_documents";

/**
 * The statement (re)filling counter rows from the stored rows: of every tenant (a migration), or of
 * the tenant `tenant` names (a parameter's mark: a purge). `bytes` is the dialect's UTF-8 length of a
 * column; `metadata` the bytes a table's row was charged for its metadata (ADR 0556). Without
 * `metadata` the statement is ADR 0538's, of five counters, as its migration shipped it.
 */
export function fillUsageSql(
  bytes: (column: string) => string,
  tenant: string | undefined,
  metadata?: (table: MetadataTable) => string,
): string {
  const oneTenant = tenant !== undefined;
  const where = oneTenant ? `WHERE tenant_id = ${tenant}` : "";
  const meta = (table: MetadataTable) => (metadata ? `, coalesce(sum(${metadata(table)}), 0)` : "");
  const none = metadata ? ", 0" : "";
  const sums = [
    `SELECT tenant_id, count(*) AS memories, 0 AS memory_bytes, 0 AS events, 0 AS event_bytes, 0 AS document_bytes${metadata ? ", 0 AS metadata_bytes" : ""} FROM memory_memories ${where} GROUP BY tenant_id`,
    `SELECT tenant_id, 0, coalesce(sum(${bytes("content")}), 0), 0, 0, 0${meta("memory_history")} FROM memory_history ${where} GROUP BY tenant_id`,
    // A memory written before its versions were kept has no history row: its own content counts.
    `SELECT tenant_id, 0, coalesce(sum(${bytes("content")}), 0), 0, 0, 0${meta("memory_memories")} FROM memory_memories AS m ${where}${oneTenant ? " AND" : " WHERE"}
       NOT EXISTS (SELECT 1 FROM memory_history AS h WHERE h.tenant_id = m.tenant_id AND h.memory_id = m.id) GROUP BY tenant_id`,
    `SELECT tenant_id, 0, 0, count(*), coalesce(sum(${bytes("content")}), 0), 0${meta("memory_events")} FROM memory_events ${where} GROUP BY tenant_id`,
    `SELECT tenant_id, 0, 0, 0, 0, coalesce(sum(${bytes("content")}), 0)${none} FROM memory_chunks ${where} GROUP BY tenant_id`,
    ...(metadata
      ? [
          `SELECT tenant_id, 0, 0, 0, 0, 0${meta("memory_documents")} FROM memory_documents ${where} GROUP BY tenant_id`,
        ]
      : []),
  ];
  const columns = usageKinds
    .filter((kind) => metadata || kind !== "metadataBytes")
    .map((kind) => usageColumns[kind]);
  const totals = oneTenant
    ? `SELECT ${tenant} AS tenant_id, ${columns.map((column) => `coalesce(sum(${column}), 0)`).join(", ")} FROM (${sums.join(" UNION ALL ")}) AS parts`
    : `SELECT tenant_id, ${columns.map((column) => `sum(${column})`).join(", ")} FROM (${sums.join(" UNION ALL ")}) AS parts GROUP BY tenant_id`;
  // `WHERE true`: SQLite reads an upsert's SELECT without a WHERE as ambiguous.
  return `INSERT INTO memory_tenant_usage (tenant_id, ${columns.join(", ")}) SELECT * FROM (${totals}) AS totals WHERE true
    ON CONFLICT (tenant_id) DO UPDATE SET ${columns.map((column) => `${column} = excluded.${column}`).join(", ")}`;
}

/** The keys an import writes on each of its events (ADR 0563's migrations). */
export const importKeys = "'importJobId', 'conversation', 'turn', 'speaker'";

/**
 * Whether memory `m`, with its first version `c`, is an event's episode as the service wrote it (ADR
 * 0563's migrations): an episode from an event or import whose first metadata is a speaker of at most
 * 80 characters and the turn's role, nothing else. Its versions keeping that metadata are free.
 */
export const serviceEpisodeSql = {
  sqlite: `m.kind = 'episode' AND json_extract(m.provenance, '$.source') IN ('event', 'import')
    AND (SELECT count(*) FROM json_each(c.metadata)) = 2 AND json_type(c.metadata, '$.speaker') = 'text'
    AND length(json_extract(c.metadata, '$.speaker')) <= 80 AND json_extract(c.metadata, '$.role') IN ('user', 'assistant')`,
  postgres: `m.kind = 'episode' AND m.provenance->>'source' IN ('event', 'import')
    AND (SELECT count(*) FROM jsonb_object_keys(c.metadata)) = 2 AND jsonb_typeof(c.metadata->'speaker') = 'string'
    AND char_length(c.metadata->>'speaker') <= 80 AND c.metadata->>'role' IN ('user', 'assistant')`,
};

/**
 * Throws `quota_exceeded` (409) when a kind that `delta` grows is now past its limit: the caller's
 * transaction rolls back, so nothing of the write is stored. `data`: `{ kind, limit, used, requested }`,
 * `used` what the tenant had before this write.
 */
export function checkUsage(after: TenantUsage, delta: Partial<TenantUsage>, limits: UsageLimits | undefined) {
  if (!limits) return;
  for (const kind of usageKinds) {
    const requested = delta[kind] ?? 0;
    if (requested <= 0 || after[kind] <= limits[kind]) continue;
    throw quotaExceeded(kind, limits[kind], after[kind] - requested, requested);
  }
}

function quotaExceeded(kind: string, limit: number, used: number, requested: number): MemoryError {
  return new MemoryError(
    "quota_exceeded",
    `The tenant's ${kind} quota is ${limit}; it uses ${used} and this write needs ${requested} more. Purge what is no longer needed, or raise the quota`,
    409,
    { data: { kind, limit, used, requested } },
  );
}

/**
 * Limits on what a tenant holds that are counted from the rows themselves, under the tenant's counter
 * row lock (ADR 0551), rather than kept in a counter: core blocks (a tenant holds few, and an edit
 * replaces a value in place) and jobs waiting to run (a handful at any time).
 */
export interface HeldLimits {
  /** Core-memory blocks over every scope. */
  readonly coreBlocks: number;
  /** UTF-8 bytes of core-memory block values over every scope. */
  readonly coreBlockBytes: number;
  /** Jobs queued or running. */
  readonly queuedJobs: number;
}

export type HeldKind = keyof HeldLimits;

/** What a tenant holds of the kinds counted from the rows (ADR 0551). */
export type HeldUsage = { readonly [Kind in HeldKind]: number };

export const heldKinds = ["coreBlocks", "coreBlockBytes", "queuedJobs"] as const;

/** The statement counting what a tenant holds of every held kind, `tenant` a numbered mark. */
export function heldUsageSql(tenant: string): string {
  return `SELECT blocks.blocks AS core_blocks, blocks.bytes AS core_block_bytes, jobs.jobs AS queued_jobs
    FROM (${heldBlocksSql(tenant)}) AS blocks, (${heldJobsSql(tenant)}) AS jobs`;
}

export function heldFromRow(row: Record<string, unknown> | undefined): HeldUsage {
  return {
    coreBlocks: Number(row?.core_blocks ?? 0),
    coreBlockBytes: Number(row?.core_block_bytes ?? 0),
    queuedJobs: Number(row?.queued_jobs ?? 0),
  };
}

/**
 * Throws `quota_exceeded` when a write grew `kind` from `before` to `after` past its limit; a write
 * that shrinks it or leaves it be passes even over the limit (the way back under stays open).
 */
export function checkHeld(kind: HeldKind, before: number, after: number, limits: HeldLimits | undefined) {
  if (!limits || after <= before || after <= limits[kind]) return;
  throw quotaExceeded(kind, limits[kind], before, after - before);
}

/**
 * The statement counting a tenant's core blocks and their bytes (ADR 0557): each block keeps the UTF-8
 * bytes of its value in `value_bytes`, summed through the index on `(tenant_id, value_bytes)`, so no
 * value is read and a save's count walks one small index entry per block the tenant holds.
 */
export function heldBlocksSql(tenant: string): string {
  return `SELECT count(*) AS blocks, coalesce(sum(value_bytes), 0) AS bytes FROM memory_core_blocks WHERE tenant_id = ${tenant}`;
}

/** Whether a save counts the tenant's blocks: not when both block limits are off (`Infinity`). */
export function countsBlocks(limits: HeldLimits | undefined): limits is HeldLimits {
  return (
    limits !== undefined && (Number.isFinite(limits.coreBlocks) || Number.isFinite(limits.coreBlockBytes))
  );
}

/** The statement counting a tenant's jobs still to run. */
export function heldJobsSql(tenant: string): string {
  return `SELECT count(*) AS jobs FROM memory_jobs WHERE tenant_id = ${tenant} AND status IN ('queued', 'running')`;
}

/** What a finished job keeps of its input: nothing (ADR 0551); its outcome stays. */
export const droppedInput = "null";

interface WithMetadata {
  readonly metadata?: unknown;
  readonly metadataCharge?: number | undefined;
}

interface WithContent extends WithMetadata {
  readonly content: string;
}

/** What inserting these memories adds: a row each, its content and its metadata (its first version). */
export function memoriesAdded(memories: readonly WithContent[]): Partial<TenantUsage> {
  return {
    memories: memories.length,
    memoryBytes: memories.reduce((sum, memory) => sum + utf8Bytes(memory.content), 0),
    metadataBytes: memories.reduce((sum, memory) => sum + chargedMetadata(memory), 0),
  };
}

/** What a memory's new version adds: its history row's content and metadata. */
export function versionAdded(memory: WithContent): Partial<TenantUsage> {
  return { memoryBytes: utf8Bytes(memory.content), metadataBytes: chargedMetadata(memory) };
}

/** What appending these events adds. */
export function eventsAdded(events: readonly WithContent[]): Partial<TenantUsage> {
  return {
    events: events.length,
    eventBytes: events.reduce((sum, event) => sum + utf8Bytes(event.content), 0),
    metadataBytes: events.reduce((sum, event) => sum + chargedMetadata(event), 0),
  };
}

/** Each tenant's share of a batch that may (in principle) span tenants, in first-seen order. */
export function byTenant<T extends { readonly tenantId: string }>(items: readonly T[]): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const group = groups.get(item.tenantId);
    if (group) group.push(item);
    else groups.set(item.tenantId, [item]);
  }
  return groups;
}
