/** Memories written: inserted (one or a batch), updated with history, and their accesses recorded. */
import { scopeKey } from "../../scope/memory-scope.ts";
import type { MemoryStore, StoredMemory } from "../memory-store.ts";
import { historyValues, memoryColumns, memoryFromRow, memoryUpdate, memoryValues } from "../row-codec.ts";
import { byTenant, chargedMetadata, memoriesAdded, versionAdded } from "../tenant-usage.ts";
import { scopeTokens } from "./scope-tokens.ts";
import { chargeUsage, mark, type SqliteContext, writeAccess } from "./sqlite-sql.ts";

const insertColumns = [...memoryColumns, "scope_tokens"];
const insertMemorySql = `INSERT INTO memory_memories (${insertColumns.join(", ")}) VALUES (${insertColumns
  .map((_, index) => mark(index + 1))
  .join(", ")}) ON CONFLICT DO NOTHING`;

function historyInsert(
  { run }: SqliteContext,
  memory: StoredMemory,
  change: string,
  reason: string | undefined,
) {
  run(
    `INSERT INTO memory_history (tenant_id, memory_id, version, change, kind, content, metadata, status, importance, reason, at, metadata_bytes)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    // With the bytes its metadata is charged (ADR 0563): the purge's recount sums them.
    [...historyValues(memory, change, reason), chargedMetadata(memory)],
  );
}

/** Inserts, or answers the active duplicate (same scope and dedupe key); inside a transaction. */
function insertOne(context: SqliteContext, memory: StoredMemory): { memory: StoredMemory; created: boolean } {
  const result = context.run(insertMemorySql, [
    ...memoryValues(memory, scopeKey(memory)),
    scopeTokens(memory.tenantId, memory).join(" "),
  ]);
  if (result.changes === 1) {
    historyInsert(context, memory, "create", undefined);
    return { memory, created: true };
  }
  const existing = context.get(
    "SELECT * FROM memory_memories WHERE tenant_id = ? AND scope_key = ? AND dedupe_key = ? AND status = 'active'",
    [memory.tenantId, scopeKey(memory), memory.dedupeKey],
  );
  if (!existing) throw new Error(`memory ${memory.id} was neither inserted nor found as a duplicate`);
  return { memory: memoryFromRow(existing), created: false };
}

export function sqliteMemoryWrites(
  context: SqliteContext,
): Pick<MemoryStore, "insertMemory" | "insertMemories" | "updateMemory" | "recordAccess"> {
  const { run, transaction } = context;
  return {
    async insertMemory(memory, limits) {
      return transaction(() => {
        const result = insertOne(context, memory);
        if (result.created) chargeUsage(context, memory.tenantId, memoriesAdded([memory]), limits);
        return result;
      });
    },

    async insertMemories(memories, limits) {
      return transaction(() => {
        const results = memories.map((memory) => insertOne(context, memory));
        const created = results.filter((result) => result.created).map((result) => result.memory);
        for (const [tenantId, group] of byTenant(created)) {
          chargeUsage(context, tenantId, memoriesAdded(group), limits);
        }
        return results;
      });
    },

    async updateMemory(tenantId, next, expectedVersion, note, limits) {
      return transaction(() => {
        const { columns, values } = memoryUpdate(next, scopeKey(next));
        const assignments = columns.map((column) => `${column} = ?`);
        const result = run(
          `UPDATE memory_memories SET ${assignments.join(", ")} WHERE tenant_id = ? AND id = ? AND version = ?`,
          [...values, tenantId, next.id, expectedVersion],
        );
        if (result.changes !== 1) return false;
        historyInsert(context, next, note.change, note.reason);
        // The new version's history row holds its content and metadata: both count.
        chargeUsage(context, tenantId, versionAdded(next), limits);
        return true;
      });
    },

    async recordAccess(tenantId, access) {
      transaction(() => writeAccess(context, tenantId, access));
    },
  };
}
