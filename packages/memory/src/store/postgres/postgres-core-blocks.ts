/** Core-memory blocks of a scope, saved all or nothing. */
import { scopeKey } from "../../scope/memory-scope.ts";
import type { MemoryStore } from "../memory-store.ts";
import { blockFromRow } from "../row-codec.ts";
import { checkHeld, countsBlocks, heldBlocksSql } from "../tenant-usage.ts";
import { lockUsage, type PostgresContext } from "./postgres-sql.ts";

const heldSql = heldBlocksSql("$1");

class BlockConflict extends Error {}

export function postgresCoreBlocks(context: PostgresContext): Pick<MemoryStore, "getBlocks" | "saveBlocks"> {
  const { all, transaction } = context;
  return {
    async getBlocks(tenantId, scope) {
      return (
        await all("SELECT * FROM memory_core_blocks WHERE tenant_id = $1 AND scope_key = $2 ORDER BY label", [
          tenantId,
          scopeKey(scope),
        ])
      ).map(blockFromRow);
    },

    async saveBlocks(tenantId, scope, changes, limits) {
      const key = scopeKey(scope);
      try {
        return await transaction(async (client) => {
          // The tenant's counter row first (as every write, ADR 0538): two saves of one tenant count
          // and check one after the other, so both cannot take the last room. Counted only when a
          // block limit is on; each block keeps its bytes, so no value is read (ADR 0557).
          const counted = countsBlocks(limits);
          if (counted) await lockUsage(client, tenantId);
          const before = counted ? (await client.query(heldSql, [tenantId])).rows[0] : undefined;
          for (const { block, expectedVersion } of changes) {
            const result =
              expectedVersion === 0
                ? await client.query(
                    `INSERT INTO memory_core_blocks (tenant_id, scope_key, label, value, value_bytes, limit_chars, version, updated_at)
                     VALUES ($1, $2, $3, $4, octet_length($4), $5, $6, $7) ON CONFLICT DO NOTHING`,
                    [tenantId, key, block.label, block.value, block.limit, block.version, block.updatedAt],
                  )
                : await client.query(
                    `UPDATE memory_core_blocks SET value = $1, value_bytes = octet_length($1), limit_chars = $2,
                       version = $3, updated_at = $4
                     WHERE tenant_id = $5 AND scope_key = $6 AND label = $7 AND version = $8`,
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
            if (result.rowCount !== 1) throw new BlockConflict();
          }
          if (before) {
            const after = (await client.query(heldSql, [tenantId])).rows[0];
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
