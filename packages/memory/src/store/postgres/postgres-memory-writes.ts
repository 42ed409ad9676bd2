/** Memories written: inserted (one or a batch in a few statements), updated with history, accesses recorded. */
import type pg from "pg";
import { scopeKey } from "../../scope/memory-scope.ts";
import type { MemoryStore, StoredMemory } from "../memory-store.ts";
import { memoryColumns, memoryFromRow, memoryUpdate, memoryValues } from "../row-codec.ts";
import { byTenant, memoriesAdded, versionAdded } from "../tenant-usage.ts";
import {
  chargeUsage,
  historyColumns,
  historyInsert,
  historyRow,
  insertChunk,
  lockUsage,
  marks,
  type PostgresContext,
  writeAccess,
} from "./postgres-sql.ts";

const insertMemorySql = `INSERT INTO memory_memories (${memoryColumns.join(", ")}) VALUES (${marks(1, memoryColumns.length)}) ON CONFLICT DO NOTHING`;

/** Inserts, or answers the active duplicate (same scope and dedupe key); inside a transaction. */
async function insertOne(
  client: pg.PoolClient,
  memory: StoredMemory,
): Promise<{ memory: StoredMemory; created: boolean }> {
  const result = await client.query(insertMemorySql, memoryValues(memory, scopeKey(memory)));
  if (result.rowCount === 1) {
    await historyInsert(client, memory, "create");
    return { memory, created: true };
  }
  const existing = (
    await client.query(
      "SELECT * FROM memory_memories WHERE tenant_id = $1 AND scope_key = $2 AND dedupe_key = $3 AND status = 'active'",
      [memory.tenantId, scopeKey(memory), memory.dedupeKey],
    )
  ).rows[0];
  if (!existing) throw new Error(`memory ${memory.id} was neither inserted nor found as a duplicate`);
  return { memory: memoryFromRow(existing), created: false };
}

export function postgresMemoryWrites(
  context: PostgresContext,
): Pick<MemoryStore, "insertMemory" | "insertMemories" | "updateMemory" | "recordAccess"> {
  const { transaction } = context;
  return {
    async insertMemory(memory, limits) {
      return transaction(async (client) => {
        await lockUsage(client, memory.tenantId);
        const result = await insertOne(client, memory);
        if (result.created) await chargeUsage(client, memory.tenantId, memoriesAdded([memory]), limits);
        return result;
      });
    },

    async insertMemories(memories, limits) {
      if (memories.length === 0) return [];
      return transaction(async (client) => {
        for (const tenantId of byTenant(memories).keys()) await lockUsage(client, tenantId);
        // A few statements for the whole batch (a round trip per row held writes to ~100 rows/s on a
        // loaded machine): multi-row inserts, then the history rows of those inserted in one more.
        const created = new Set<string>();
        for (let from = 0; from < memories.length; from += insertChunk) {
          const chunk = memories.slice(from, from + insertChunk);
          const values = chunk.flatMap((memory) => memoryValues(memory, scopeKey(memory)));
          const rows = chunk.map(
            (_, index) => `(${marks(index * memoryColumns.length + 1, memoryColumns.length)})`,
          );
          const result = await client.query(
            `INSERT INTO memory_memories (${memoryColumns.join(", ")}) VALUES ${rows.join(", ")} ON CONFLICT DO NOTHING RETURNING id`,
            values,
          );
          for (const row of result.rows) created.add(String(row.id));
        }
        const fresh = memories.filter((memory) => created.has(memory.id));
        for (const [tenantId, group] of byTenant(fresh)) {
          await chargeUsage(client, tenantId, memoriesAdded(group), limits);
        }
        for (let from = 0; from < fresh.length; from += insertChunk) {
          const chunk = fresh.slice(from, from + insertChunk);
          const values = chunk.flatMap((memory) => historyRow(memory, "create"));
          const rows = chunk.map(
            (_, index) => `(${marks(index * historyColumns.length + 1, historyColumns.length)})`,
          );
          await client.query(
            `INSERT INTO memory_history (${historyColumns.join(", ")}) VALUES ${rows.join(", ")}`,
            values,
          );
        }
        const results = [];
        for (const memory of memories) {
          if (created.has(memory.id)) {
            results.push({ memory, created: true });
            continue;
          }
          // Not inserted: the active memory of its scope and dedupe key answers (as `insertOne` does).
          const existing = (
            await client.query(
              "SELECT * FROM memory_memories WHERE tenant_id = $1 AND scope_key = $2 AND dedupe_key = $3 AND status = 'active'",
              [memory.tenantId, scopeKey(memory), memory.dedupeKey],
            )
          ).rows[0];
          if (!existing) throw new Error(`memory ${memory.id} was neither inserted nor found as a duplicate`);
          results.push({ memory: memoryFromRow(existing), created: false });
        }
        return results;
      });
    },

    async updateMemory(tenantId, next, expectedVersion, note, limits) {
      return transaction(async (client) => {
        await lockUsage(client, tenantId);
        const { columns, values } = memoryUpdate(next, scopeKey(next));
        const assignments = columns.map((column, index) => `${column} = $${index + 1}`);
        const base = values.length;
        const result = await client.query(
          `UPDATE memory_memories SET ${assignments.join(", ")} WHERE tenant_id = $${base + 1} AND id = $${base + 2} AND version = $${base + 3}`,
          [...values, tenantId, next.id, expectedVersion],
        );
        if (result.rowCount !== 1) return false;
        await historyInsert(client, next, note.change, note.reason);
        // The new version's history row holds its content and metadata: both count.
        await chargeUsage(client, tenantId, versionAdded(next), limits);
        return true;
      });
    },

    async recordAccess(tenantId, access) {
      await transaction((client) => writeAccess(client, tenantId, access));
    },
  };
}
