/** Retrieval traces, written with their access records. */
import type { MemoryStore } from "../memory-store.ts";
import { scopeCondition, scopeParameters, traceFromRow } from "../row-codec.ts";
import { bind, mark, type SqliteContext, writeAccess } from "./sqlite-sql.ts";

export function sqliteTraces(
  context: SqliteContext,
): Pick<MemoryStore, "insertTrace" | "getTrace" | "listTraces"> {
  const { all, get, run, transaction } = context;
  return {
    async insertTrace(trace, accesses) {
      transaction(() => {
        run(
          `INSERT INTO memory_traces (id, tenant_id, user_id, agent_id, session_id, operation, query, ranking, results, duration_ms, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [
            trace.id,
            trace.tenantId,
            ...scopeParameters(trace),
            trace.operation,
            trace.query,
            trace.ranking,
            JSON.stringify(trace.results),
            trace.durationMs,
            trace.createdAt,
          ],
        );
        for (const access of accesses) writeAccess(context, trace.tenantId, access);
      });
    },

    async getTrace(tenantId, id) {
      const row = get("SELECT * FROM memory_traces WHERE tenant_id = ? AND id = ?", [tenantId, id]);
      return row ? traceFromRow(row) : undefined;
    },

    async listTraces(tenantId, scope, listOptions) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT * FROM memory_traces WHERE tenant_id = ${mark(1)}${scopeCondition(scope, parameters, mark)}`;
      if (listOptions.operation) sql += ` AND operation = ${bind(parameters, listOptions.operation)}`;
      return all(`${sql} ORDER BY seq DESC LIMIT ${bind(parameters, listOptions.limit)}`, parameters).map(
        traceFromRow,
      );
    },
  };
}
