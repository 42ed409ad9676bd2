/** SQL helpers shared by the PostgreSQL store's files. */
import { postgresDialect } from "@tackle/storage";
import type pg from "pg";
import type { AccessRecord, StoredMemory } from "../memory-store.ts";
import { historyValues, memoryColumns, scopeParameters } from "../row-codec.ts";
import {
  chargedMetadata,
  chargeUsageSql,
  chargeUsageValues,
  checkUsage,
  type MetadataTable,
  type TenantUsage,
  type UsageLimits,
  usageFromRow,
} from "../tenant-usage.ts";
import type { createUnitScope, Unit } from "../unit-scope.ts";

export type Row = Record<string, unknown>;

export interface PostgresUnit extends Unit {
  readonly client: pg.PoolClient;
  /** Savepoint steps run one after another on the unit's connection. */
  steps: Promise<unknown>;
  savepoints: number;
}
/** Parameter `index` (1-based), as the dialect spells it (ADR 0008). */
export const mark = (index: number) => postgresDialect.param(index);
export const memorySelect = ["seq", ...memoryColumns].map((column) => `m.${column}`).join(", ");

export function marks(start: number, count: number): string {
  return Array.from({ length: count }, (_, index) => postgresDialect.param(start + index)).join(", ");
}

/**
 * `column` is one of `values` through the dialect's `anyOf`: the list bound whole as the next
 * parameter, so a statement's text does not change with the list's length.
 */
export function oneOf(column: string, values: readonly string[], parameters: unknown[]): string {
  parameters.push(postgresDialect.list(values));
  return postgresDialect.anyOf(column, parameters.length);
}

/**
 * The query's words with everything but letters and digits removed, so text handed to the store can
 * never become tsquery syntax (`&`, `!`, `:*`, `<->`, parentheses).
 */
export function plainWords(terms: readonly string[]): string[] {
  return terms.map((term) => term.replace(/[^\p{L}\p{N}]/gu, "")).filter(Boolean);
}

/** tsquery text: plain words ORed (ANDed with `every`); a term ending in `*` is a prefix (`:*`). */
export function tsQuery(terms: readonly string[], every = false): string {
  return terms
    .map((term) => {
      const word = term.replace(/[^\p{L}\p{N}]/gu, "");
      return word.length === 0 ? "" : term.endsWith("*") ? `${word}:*` : word;
    })
    .filter(Boolean)
    .join(every ? " & " : " | ");
}

/** Rows a multi-row insert writes at once (24 columns: well under the protocol's 65,535 parameters). */
export const insertChunk = 500;
export const historyColumns = [
  "tenant_id",
  "memory_id",
  "version",
  "change",
  "kind",
  "content",
  "metadata",
  "status",
  "importance",
  "reason",
  "at",
  "metadata_bytes",
] as const;

/** A history row's values in `historyColumns` order, with the bytes its metadata is charged (ADRs 0556, 0563). */
export function historyRow(memory: StoredMemory, change: string, reason?: string): unknown[] {
  return [...historyValues(memory, change, reason), chargedMetadata(memory)];
}

/** What every aggregate's methods share: the pool, the unit of work's connection, statement helpers. */
export interface PostgresContext {
  readonly pool: pg.Pool;
  /** The unit's connection when the caller is in one, else the pool. */
  readonly db: () => pg.Pool | pg.PoolClient;
  readonly all: (sql: string, parameters?: readonly unknown[]) => Promise<Row[]>;
  readonly one: (sql: string, parameters?: readonly unknown[]) => Promise<Row | undefined>;
  /** Its own transaction, or a savepoint of the caller's unit of work, one at a time. */
  readonly transaction: <T>(body: (client: pg.PoolClient) => Promise<T>) => Promise<T>;
  readonly units: ReturnType<typeof createUnitScope<PostgresUnit>>;
  readonly jobLeaseMs: number;
}

export async function historyInsert(
  client: pg.PoolClient,
  memory: StoredMemory,
  change: string,
  reason?: string,
) {
  await client.query(
    `INSERT INTO memory_history (${historyColumns.join(", ")}) VALUES (${marks(1, historyColumns.length)})`,
    historyRow(memory, change, reason),
  );
}

/**
 * Counts one access on each of a list of memories (`$at`, `$tenant`, `$ids`: parameter numbers). The
 * rows are locked in id order first: two searches counting the same hits in the order each ranked
 * them (or a scan meeting rows an update moved) took each other's row locks crosswise and deadlocked.
 */
export function countAccesses(at: number, tenant: number, ids: number): string {
  return `UPDATE memory_memories AS m SET access_count = m.access_count + 1, last_accessed_at = $${at}
    FROM (SELECT id FROM memory_memories WHERE tenant_id = $${tenant} AND ${postgresDialect.anyOf("id", ids)}
          ORDER BY id FOR UPDATE) AS locked
    WHERE m.tenant_id = $${tenant} AND m.id = locked.id`;
}

/**
 * Adds accesses to their counts (`$rows`: a JSON array of `AccessCount`s, keys unique, in key order
 * so two statements counting the same rows take their locks in one order), the tenant at `$tenant`.
 * An access naming a memory no longer stored adds no row (ADR 0559): a search answered before a purge
 * records its hits after it. `stored` says whether access `a`'s memory is: one of the memories the
 * access's count (`countAccesses`, run first) updated, their rows locked in id order. A purge that
 * locked them first was waited for (and the rows found gone); one that comes after waits for this
 * transaction's commit and deletes what it added.
 */
export function countAccessRows(tenant: number, rows: number, stored: string): string {
  return `INSERT INTO memory_access_log (tenant_id, user_id, agent_id, session_id, scope_key, kind, memory_id, day, accesses)
    SELECT $${tenant}, a.user_id, a.agent_id, a.session_id, json_build_array(a.user_id, a.agent_id, a.session_id)::text,
      a.kind, a.memory_id, a.day, a.accesses
    FROM ROWS FROM (jsonb_to_recordset($${rows}::jsonb)
      AS (user_id text, agent_id text, session_id text, kind text, memory_id text, day text, accesses bigint))
      WITH ORDINALITY AS a(user_id, agent_id, session_id, kind, memory_id, day, accesses, position)
    WHERE a.memory_id = '' OR ${stored}
    ORDER BY a.position
    ON CONFLICT (tenant_id, day, kind, scope_key, memory_id)
    DO UPDATE SET accesses = memory_access_log.accesses + EXCLUDED.accesses`;
}

export interface AccessCount {
  readonly user_id: string | null;
  readonly agent_id: string | null;
  readonly session_id: string | null;
  readonly kind: AccessRecord["kind"];
  readonly memory_id: string;
  readonly day: string;
  readonly accesses: number;
}

/** The counts accesses add to: one per day, kind, scope and memory (a search names none: ''), in key order. */
export function accessCounts(accesses: readonly AccessRecord[]): AccessCount[] {
  const counts = new Map<string, AccessCount>();
  for (const access of accesses) {
    const [userId, agentId, sessionId] = scopeParameters(access.scope);
    for (const memoryId of access.memoryIds.length > 0 ? access.memoryIds : [""]) {
      const row = {
        user_id: userId ?? null,
        agent_id: agentId ?? null,
        session_id: sessionId ?? null,
        kind: access.kind,
        memory_id: memoryId,
        day: access.at.slice(0, 10),
      };
      const key = JSON.stringify(row);
      counts.set(key, { ...row, accesses: (counts.get(key)?.accesses ?? 0) + 1 });
    }
  }
  return [...counts.entries()].sort(([left], [right]) => (left < right ? -1 : 1)).map(([, row]) => row);
}

/** Records a search, hit or read: its counts in one statement, and hits and reads counted on the memories. */
export async function writeAccess(client: pg.PoolClient, tenantId: string, access: AccessRecord) {
  // The memories first, locked and counted, then the access rows of those still stored (ADR 0559).
  let counted: string[] = [];
  if (access.kind !== "search" && access.memoryIds.length > 0) {
    const updated = await client.query(`${countAccesses(1, 2, 3)} RETURNING m.id`, [
      access.at,
      tenantId,
      postgresDialect.list(access.memoryIds),
    ]);
    counted = updated.rows.map((row) => String(row.id));
  }
  await client.query(countAccessRows(1, 2, "a.memory_id = ANY($3::text[])"), [
    tenantId,
    JSON.stringify(accessCounts([access])),
    counted,
  ]);
}

const chargeSql = chargeUsageSql(mark);

/**
 * Adds `delta` to the tenant's usage inside the write's transaction; past `limits`, throws
 * `quota_exceeded` (the transaction rolls back). The upsert locks the tenant's counter row until the
 * commit, so a tenant's writers pass the check one at a time and two never both take the last place.
 */
export async function chargeUsage(
  client: pg.PoolClient,
  tenantId: string,
  delta: Partial<TenantUsage>,
  limits: UsageLimits | undefined,
): Promise<void> {
  const result = await client.query(chargeSql, chargeUsageValues(tenantId, delta));
  checkUsage(usageFromRow(result.rows[0] as Row), delta, limits);
}

/**
 * Locks the tenant's counter row before a write touches any other row: every writer (and a purge)
 * takes it first, so none holds a memory's or its generation's lock while waiting for it (two
 * writers taking them in the opposite order deadlocked). A session's lock (ADR 0535) comes before it.
 */
export async function lockUsage(client: pg.PoolClient, tenantId: string): Promise<void> {
  await client.query(lockUsageSql, [tenantId]);
}

export const lockUsageSql =
  "INSERT INTO memory_tenant_usage (tenant_id) VALUES ($1) ON CONFLICT (tenant_id) DO UPDATE SET memories = memory_tenant_usage.memories";

/** PostgreSQL's UTF-8 length of a text column. */
export const postgresBytes = (column: string) => `octet_length(${column})`;

/**
 * The bytes a row's metadata was charged (ADR 0556). JSONB does not keep the text it was given (its
 * own text spaces keys and values), so each row stores what its write charged in `metadata_bytes`; a
 * memory row written before versions were kept has no history row and counts its JSONB text (an
 * empty object none, as a write charges it: ADR 0559).
 */
export const postgresMetadataBytes = (table: MetadataTable) =>
  table === "memory_memories"
    ? "(CASE WHEN metadata = '{}'::jsonb THEN 0 ELSE octet_length(metadata::text) END)"
    : "metadata_bytes";
