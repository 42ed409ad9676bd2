/** Counts of a scope's memories, their accesses and searches. */
import type { MemoryStore } from "../memory-store.ts";
import { countsFrom, scopeCondition } from "../row-codec.ts";
import { mark, type PostgresContext } from "./postgres-sql.ts";

export function postgresMemoryStatistics(
  context: PostgresContext,
): Pick<MemoryStore, "countMemories" | "countAccessedMemories" | "accessTrends" | "countSearches"> {
  const { all, one } = context;
  return {
    async countMemories(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      return countsFrom(
        await all(
          `SELECT status, kind, COUNT(*) AS n FROM memory_memories WHERE tenant_id = $1${scopeCondition(scope, parameters, mark)} GROUP BY status, kind`,
          parameters,
        ),
      );
    },

    async countAccessedMemories(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      const rows = await all(
        `SELECT COUNT(*) AS n FROM memory_memories WHERE tenant_id = $1 AND status = 'active' AND access_count > 0${scopeCondition(scope, parameters, mark)}`,
        parameters,
      );
      return Number(rows[0]?.n ?? 0);
    },

    async accessTrends(tenantId, scope, sinceDay) {
      const parameters: unknown[] = [tenantId, sinceDay];
      const rows = await all(
        `SELECT day, COALESCE(SUM(accesses) FILTER (WHERE kind = 'search'), 0) AS searches,
           COALESCE(SUM(accesses) FILTER (WHERE kind = 'hit'), 0) AS hits,
           COALESCE(SUM(accesses) FILTER (WHERE kind = 'read'), 0) AS reads
         FROM memory_access_log WHERE tenant_id = $1 AND day >= $2${scopeCondition(scope, parameters, mark)} GROUP BY day ORDER BY day`,
        parameters,
      );
      return rows.map((row) => ({
        day: String(row.day),
        searches: Number(row.searches),
        hits: Number(row.hits),
        reads: Number(row.reads),
      }));
    },

    async countSearches(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      const row = await one(
        `SELECT COALESCE(SUM(accesses), 0) AS n FROM memory_access_log WHERE tenant_id = $1 AND kind = 'search'${scopeCondition(scope, parameters, mark)}`,
        parameters,
      );
      return Number(row?.n ?? 0);
    },
  };
}
