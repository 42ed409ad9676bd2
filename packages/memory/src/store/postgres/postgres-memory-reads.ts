/** Memories read: by id, their history, a listed page, the generation and changes, those with embeddings. */
import type { MemoryStore } from "../memory-store.ts";
import { memoryFromRow, scopeCondition } from "../row-codec.ts";
import { mark, memorySelect, oneOf, type PostgresContext } from "./postgres-sql.ts";

export function postgresMemoryReads(
  context: PostgresContext,
): Pick<
  MemoryStore,
  "getMemories" | "memoryHistory" | "listMemories" | "memoryGeneration" | "memoryChanges" | "embeddedMemories"
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

    async memoryChanges(tenantId, scope, { since, limit }) {
      // One statement, one snapshot: the generation (the tenant's stamp) and the rows agree (a row
      // stamped at or below it has committed: the trigger draws under the generation row's lock).
      const parameters: unknown[] = [tenantId];
      let changed = "m.status = 'active'";
      if (since !== undefined) {
        parameters.push(since);
        changed = `m.stamp > $${parameters.length}`;
      }
      const inScope = scopeCondition(scope, parameters, mark, "m.");
      parameters.push(limit);
      const rows = await all(
        `SELECT g.generation AS tenant_stamp, g.removed AS tenant_removed, c.*
         FROM (SELECT $1::text AS tenant_id) t
         LEFT JOIN memory_generations g ON g.tenant_id = t.tenant_id
         LEFT JOIN LATERAL (
           SELECT ${memorySelect} FROM memory_memories m
           WHERE m.tenant_id = $1 AND ${changed}${inScope}
           ORDER BY m.seq DESC LIMIT $${parameters.length}
         ) c ON true`,
        parameters,
      );
      const tenant = rows[0];
      return {
        stamp: Number(tenant?.tenant_stamp ?? 0),
        removed: Number(tenant?.tenant_removed ?? 0),
        rows: rows
          .filter((row) => row.id !== null)
          .map((row) => ({ seq: Number(row.seq), memory: memoryFromRow(row) })),
      };
    },

    async embeddedMemories(tenantId, scope, kinds) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT ${memorySelect} FROM memory_memories m WHERE m.tenant_id = $1 AND m.status = 'active' AND m.embedding IS NOT NULL${scopeCondition(scope, parameters, mark, "m.")}`;
      if (kinds) sql += ` AND ${oneOf("m.kind", kinds, parameters)}`;
      return (await all(sql, parameters)).map(memoryFromRow);
    },
  };
}
