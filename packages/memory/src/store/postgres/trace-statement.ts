/**
 * A retrieval trace and its accesses as one PostgreSQL statement: a search's telemetry costs one
 * round trip instead of six (begin, durability, trace, two access counts, memories' counts, commit).
 */
import type { AccessRecord, StoredTrace } from "../memory-store.ts";
import { scopeParameters } from "../row-codec.ts";
import { accessCounts, countAccesses, countAccessRows } from "./postgres-sql.ts";

/**
 * Undefined when more than one access names memories (the store then writes them one by one).
 * Outside a unit of work only: `set_config(…, true)` lasts until the statement's own transaction
 * commits, so the trace is not waited on to reach the disk (telemetry: a crash may lose the last
 * few; memories and events never are).
 */
export function traceStatement(trace: StoredTrace, accesses: readonly AccessRecord[]) {
  // The hits' access rows name only the memories the count updated, their rows locked by it in id
  // order: a memory a purge deleted (or is deleting: the lock waits for it) gets no row (ADR 0559).
  const logged = accessCounts(accesses);
  // Reads and hits count on the memories (searches do not): one access naming them, as a search has.
  const touching = accesses.filter((access) => access.kind !== "search" && access.memoryIds.length > 0);
  if (touching.length > 1) return undefined;
  const touched = touching[0];
  const text = `WITH durability AS (SELECT set_config('synchronous_commit', 'off', true) AS setting),
    trace AS (
      INSERT INTO memory_traces (id, tenant_id, user_id, agent_id, session_id, operation, query, ranking, results, duration_ms, created_at)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)),
    touched AS (${countAccesses(13, 2, 14)} RETURNING m.id),
    logged AS (${countAccessRows(2, 12, "a.memory_id IN (SELECT id FROM touched)")})
    SELECT setting FROM durability`;
  const values = [
    trace.id,
    trace.tenantId,
    ...scopeParameters(trace),
    trace.operation,
    trace.query,
    trace.ranking,
    JSON.stringify(trace.results),
    trace.durationMs,
    trace.createdAt,
    JSON.stringify(logged),
    touched?.at ?? null,
    [...(touched?.memoryIds ?? [])],
  ];
  return { text, values };
}
