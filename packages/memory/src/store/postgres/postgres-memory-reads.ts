/** Memories read: by id, their history, a listed page, the generation, those with embeddings. */
import type { MemoryStore } from "../memory-store.ts";
import { memoryFromRow, scopeCondition } from "../row-codec.ts";
import { mark, memorySelect, oneOf, type PostgresContext } from "./postgres-sql.ts";

export function postgresMemoryReads(
  context: PostgresContext,
): Pick<
  MemoryStore,
  "getMemories" | "memoryHistory" | "listMemories" | "memoryGeneration" | "embeddedMemories"
> {
  const { all, one } = context;
  return {
    async getMemories(tenantId, ids) {
      if (ids.length === 0) return [];
      return (
        await all("SELECT * FROM memory_memories WHERE tenant_id = $1 AND id = ANY($2)", [tenantId, [...ids]])
      ).map(memoryFromRow);
    },

    async memoryHistory(tenantId, id) {
      const rows = await all(
        "SELECT * FROM memory_history WHERE tenant_id = $1 AND memory_id = $2 ORDER BY version",
        [tenantId, id],
      );
      return rows.map((row) => ({
        version: Number(row.version),
        change: row.change as never,
        kind: row.kind as never,
        content: String(row.content),
        metadata: row.metadata as Record<string, unknown>,
        status: row.status as never,
        importance: Number(row.importance),
        ...(row.reason === null ? {} : { reason: String(row.reason) }),
        at: String(row.at),
      }));
    },

    async listMemories(tenantId, scope, listOptions) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT ${memorySelect} FROM memory_memories m WHERE m.tenant_id = $1${scopeCondition(scope, parameters, mark, "m.")}`;
      if (listOptions.statuses) sql += ` AND ${oneOf("m.status", listOptions.statuses, parameters)}`;
      if (listOptions.kinds) sql += ` AND ${oneOf("m.kind", listOptions.kinds, parameters)}`;
      if (listOptions.beforeId !== undefined) {
        parameters.push(listOptions.beforeId);
        sql += ` AND m.seq < (SELECT b.seq FROM memory_memories b WHERE b.tenant_id = $1 AND b.id = $${parameters.length})`;
      }
      const order = {
        recent: "m.updated_at DESC, m.seq DESC",
        accessed: "m.access_count DESC, m.seq DESC",
        importance: "m.importance DESC, m.seq DESC",
        written: "m.seq DESC",
      }[listOptions.order];
      parameters.push(listOptions.limit);
      return (await all(`${sql} ORDER BY ${order} LIMIT $${parameters.length}`, parameters)).map(
        memoryFromRow,
      );
    },

    async memoryGeneration(tenantId) {
      const row = await one("SELECT generation FROM memory_generations WHERE tenant_id = $1", [tenantId]);
      return row === undefined ? 0 : String(row.generation);
    },

    async embeddedMemories(tenantId, scope, kinds) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT ${memorySelect} FROM memory_memories m WHERE m.tenant_id = $1 AND m.status = 'active' AND m.embedding IS NOT NULL${scopeCondition(scope, parameters, mark, "m.")}`;
      if (kinds) sql += ` AND ${oneOf("m.kind", kinds, parameters)}`;
      return (await all(sql, parameters)).map(memoryFromRow);
    },
  };
}
