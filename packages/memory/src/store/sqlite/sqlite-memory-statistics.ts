/** Counts of a scope's memories, their accesses and searches. */
import type { MemoryStore } from "../memory-store.ts";
import { countsFrom, scopeCondition } from "../row-codec.ts";
import { mark, type SqliteContext } from "./sqlite-sql.ts";

export function sqliteMemoryStatistics(
  context: SqliteContext,
): Pick<MemoryStore, "countMemories" | "countAccessedMemories" | "accessTrends" | "countSearches"> {
  const { all, get } = context;
  return {
    async countMemories(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      const rows = all(
        `SELECT status, kind, COUNT(*) AS n FROM memory_memories WHERE tenant_id = ${mark(1)}${scopeCondition(scope, parameters, mark)} GROUP BY status, kind`,
        parameters,
      );
      return countsFrom(rows);
    },

    async countAccessedMemories(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      const row = get(
        `SELECT COUNT(*) AS n FROM memory_memories WHERE tenant_id = ${mark(1)} AND status = 'active' AND access_count > 0${scopeCondition(scope, parameters, mark)}`,
        parameters,
      );
      return Number(row?.n ?? 0);
    },

    async accessTrends(tenantId, scope, sinceDay) {
      const parameters: unknown[] = [tenantId, sinceDay];
      const rows = all(
        `SELECT day, SUM(CASE WHEN kind = 'search' THEN accesses ELSE 0 END) AS searches,
           SUM(CASE WHEN kind = 'hit' THEN accesses ELSE 0 END) AS hits,
           SUM(CASE WHEN kind = 'read' THEN accesses ELSE 0 END) AS reads
         FROM memory_access_log WHERE tenant_id = ${mark(1)} AND day >= ${mark(2)}${scopeCondition(scope, parameters, mark)} GROUP BY day ORDER BY day`,
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
      const row = get(
        `SELECT COALESCE(SUM(accesses), 0) AS n FROM memory_access_log WHERE tenant_id = ${mark(1)} AND kind = 'search'${scopeCondition(scope, parameters, mark)}`,
        parameters,
      );
      return Number(row?.n ?? 0);
    },
  };
}
