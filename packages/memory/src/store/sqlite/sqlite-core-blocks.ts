/** Core-memory blocks of a scope, saved all or nothing. */
import { scopeKey } from "../../scope/memory-scope.ts";
import type { MemoryStore } from "../memory-store.ts";
import { blockFromRow } from "../row-codec.ts";
import { checkHeld, countsBlocks, heldBlocksSql } from "../tenant-usage.ts";
import type { SqliteContext } from "./sqlite-sql.ts";

const heldSql = heldBlocksSql("?");

class BlockConflict extends Error {}

export function sqliteCoreBlocks(context: SqliteContext): Pick<MemoryStore, "getBlocks" | "saveBlocks"> {
  const { all, get, run, transaction } = context;
  return {
    async getBlocks(tenantId, scope) {
      return all("SELECT * FROM memory_core_blocks WHERE tenant_id = ? AND scope_key = ? ORDER BY label", [
        tenantId,
        scopeKey(scope),
      ]).map(blockFromRow);
    },

    async saveBlocks(tenantId, scope, changes, limits) {
      const key = scopeKey(scope);
      try {
        return transaction(() => {
          // Counted only when a block limit is on; each block keeps its bytes, so no value is read.
          const before = countsBlocks(limits) ? get(heldSql, [tenantId]) : undefined;
          for (const { block, expectedVersion } of changes) {
            const result =
              expectedVersion === 0
                ? run(
                    `INSERT INTO memory_core_blocks (tenant_id, scope_key, label, value, value_bytes, limit_chars, version, updated_at)
                     VALUES (?1, ?2, ?3, ?4, length(CAST(?4 AS BLOB)), ?5, ?6, ?7) ON CONFLICT DO NOTHING`,
                    [tenantId, key, block.label, block.value, block.limit, block.version, block.updatedAt],
                  )
                : run(
                    `UPDATE memory_core_blocks SET value = ?1, value_bytes = length(CAST(?1 AS BLOB)), limit_chars = ?2,
                       version = ?3, updated_at = ?4
                     WHERE tenant_id = ?5 AND scope_key = ?6 AND label = ?7 AND version = ?8`,
                    [
                      block.value,
                      block.limit,
                      block.version,
                      block.updatedAt,
                      tenantId,
                      key,
                      block.label,
                      expectedVersion,
                    ],
                  );
            if (result.changes !== 1) throw new BlockConflict();
          }
          if (before) {
            // Counted after the writes, in their transaction: a refusal rolls every block back.
            const after = get(heldSql, [tenantId])!;
            checkHeld("coreBlocks", Number(before.blocks), Number(after.blocks), limits);
            checkHeld("coreBlockBytes", Number(before.bytes), Number(after.bytes), limits);
          }
          return true;
        });
      } catch (error) {
        if (error instanceof BlockConflict) return false;
        throw error;
      }
    },
  };
}
