/** Retrieval traces, written with their access records (one statement outside a unit of work). */
import type { MemoryStore } from "../memory-store.ts";
import { scopeCondition, scopeParameters, traceFromRow } from "../row-codec.ts";
import { mark, type PostgresContext, writeAccess } from "./postgres-sql.ts";
import { traceStatement } from "./trace-statement.ts";

export function postgresTraces(
  context: PostgresContext,
): Pick<MemoryStore, "insertTrace" | "getTrace" | "listTraces"> {
  const { pool, all, one, transaction, units } = context;
  return {
    async insertTrace(trace, accesses) {
      const statement = units.active() === undefined ? traceStatement(trace, accesses) : undefined;
      if (statement) {
        await pool.query(statement);
        return;
      }
      // Inside a unit of work: its own commit decides durability, so a savepoint as before.
      await transaction(async (client) => {
        await client.query(
          `INSERT INTO memory_traces (id, tenant_id, user_id, agent_id, session_id, operation, query, ranking, results, duration_ms, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
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
        for (const access of accesses) await writeAccess(client, trace.tenantId, access);
      });
    },

    async getTrace(tenantId, id) {
      const row = await one("SELECT * FROM memory_traces WHERE tenant_id = $1 AND id = $2", [tenantId, id]);
      return row ? traceFromRow(row) : undefined;
    },

    async listTraces(tenantId, scope, listOptions) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT * FROM memory_traces WHERE tenant_id = $1${scopeCondition(scope, parameters, mark)}`;
      if (listOptions.operation) {
        parameters.push(listOptions.operation);
        sql += ` AND operation = $${parameters.length}`;
      }
      parameters.push(listOptions.limit);
      return (await all(`${sql} ORDER BY seq DESC LIMIT $${parameters.length}`, parameters)).map(
        traceFromRow,
      );
    },
  };
}
