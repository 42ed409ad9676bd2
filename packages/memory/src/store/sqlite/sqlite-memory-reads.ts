/** Memories read: by id, their history, a listed page, the generation and changes, those with embeddings. */
import type { MemoryStore } from "../memory-store.ts";
import { memoryFromRow, scopeCondition } from "../row-codec.ts";
import { bind, mark, oneOf, type SqliteContext } from "./sqlite-sql.ts";

export function sqliteMemoryReads(
  context: SqliteContext,
): Pick<
  MemoryStore,
  "getMemories" | "memoryHistory" | "listMemories" | "memoryGeneration" | "memoryChanges" | "embeddedMemories"
> {
  const { all, get } = context;
  return {
    async getMemories(tenantId, ids) {
      if (ids.length === 0) return [];
      const parameters: unknown[] = [tenantId];
      // `+tenant_id`: the planner otherwise walks the tenant's rows instead of the id index.
      const rows = all(
        `SELECT * FROM memory_memories WHERE +tenant_id = ? AND ${oneOf("id", ids, parameters)}`,
        parameters,
      );
      return rows.map(memoryFromRow);
    },

    async memoryHistory(tenantId, id) {
      const rows = all(
        "SELECT * FROM memory_history WHERE tenant_id = ? AND memory_id = ? ORDER BY version",
        [tenantId, id],
      );
      return rows.map((row) => ({
        version: Number(row.version),
        change: row.change as never,
        kind: row.kind as never,
        content: String(row.content),
        metadata: JSON.parse(String(row.metadata)),
        status: row.status as never,
        importance: Number(row.importance),
        ...(row.reason === null ? {} : { reason: String(row.reason) }),
        at: String(row.at),
      }));
    },

    async listMemories(tenantId, scope, listOptions) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT * FROM memory_memories WHERE tenant_id = ${mark(1)}${scopeCondition(scope, parameters, mark)}`;
      if (listOptions.statuses) sql += ` AND ${oneOf("status", listOptions.statuses, parameters)}`;
      if (listOptions.kinds) sql += ` AND ${oneOf("kind", listOptions.kinds, parameters)}`;
      if (listOptions.beforeId !== undefined) {
        sql += ` AND seq < (SELECT seq FROM memory_memories WHERE tenant_id = ${mark(1)} AND id = ${bind(parameters, listOptions.beforeId)})`;
      }
      const order = {
        recent: "updated_at DESC, seq DESC",
        accessed: "access_count DESC, seq DESC",
        importance: "importance DESC, seq DESC",
        written: "seq DESC",
      }[listOptions.order];
      return all(`${sql} ORDER BY ${order} LIMIT ${bind(parameters, listOptions.limit)}`, parameters).map(
        memoryFromRow,
      );
    },

    async memoryGeneration(tenantId) {
      // As text: random() fills all 64 bits, past what a JavaScript number holds exactly.
      const row = get(
        "SELECT CAST(generation AS TEXT) AS generation FROM memory_generations WHERE tenant_id = ?",
        [tenantId],
      );
      return row === undefined ? 0 : String(row.generation);
    },

    async memoryChanges(tenantId, scope, { since, limit }) {
      // The stamp first: a row committed after it is answered again by the next call.
      const tenant = get("SELECT stamp, removed FROM memory_generations WHERE tenant_id = ?", [tenantId]);
      const parameters: unknown[] = [tenantId];
      // Changes: the (tenant, stamp) index, the scope a filter (`+`), or the planner walks the scope.
      const changed =
        since === undefined
          ? `status = 'active'${scopeCondition(scope, parameters, mark)}`
          : `stamp > ${bind(parameters, since)}${scopeCondition(scope, parameters, mark, "+")}`;
      const rows = all(
        `SELECT * FROM memory_memories WHERE tenant_id = ${mark(1)} AND ${changed} ORDER BY seq DESC LIMIT ${bind(parameters, limit)}`,
        parameters,
      );
      return {
        stamp: Number(tenant?.stamp ?? 0),
        removed: Number(tenant?.removed ?? 0),
        rows: rows.map((row) => ({ seq: Number(row.seq), memory: memoryFromRow(row) })),
      };
    },

    async embeddedMemories(tenantId, scope, kinds) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT * FROM memory_memories WHERE tenant_id = ${mark(1)} AND status = 'active' AND embedding IS NOT NULL${scopeCondition(scope, parameters, mark)}`;
      if (kinds) sql += ` AND ${oneOf("kind", kinds, parameters)}`;
      return all(sql, parameters).map(memoryFromRow);
    },
  };
}
