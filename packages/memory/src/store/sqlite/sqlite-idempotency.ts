/** Idempotency keys of writes, each kept with its answer until it expires. */
import type { MemoryStore } from "../memory-store.ts";
import { idempotencyFromRow, scopeParameters } from "../row-codec.ts";
import type { SqliteContext } from "./sqlite-sql.ts";

export function sqliteIdempotency(
  context: SqliteContext,
): Pick<MemoryStore, "findIdempotencyKey" | "recordIdempotencyKey" | "sweepIdempotencyKeys"> {
  const { get, run } = context;
  return {
    async findIdempotencyKey(tenantId, key, now) {
      const row = get(
        "SELECT * FROM memory_idempotency_keys WHERE tenant_id = ? AND key = ? AND expires_at > ?",
        [tenantId, key, now],
      );
      return row ? idempotencyFromRow(row) : undefined;
    },

    async recordIdempotencyKey(record) {
      // A new key, or one whose record expired (replaced in place).
      const result = run(
        `INSERT INTO memory_idempotency_keys (tenant_id, key, fingerprint, answer, created_at, expires_at, user_id, agent_id, session_id)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (tenant_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, answer = excluded.answer,
           created_at = excluded.created_at, expires_at = excluded.expires_at, user_id = excluded.user_id,
           agent_id = excluded.agent_id, session_id = excluded.session_id
         WHERE memory_idempotency_keys.expires_at <= excluded.created_at`,
        [
          record.tenantId,
          record.key,
          record.fingerprint,
          record.answer,
          record.createdAt,
          record.expiresAt,
          ...scopeParameters(record.scope),
        ],
      );
      return result.changes === 1;
    },

    async sweepIdempotencyKeys(now) {
      return Number(run("DELETE FROM memory_idempotency_keys WHERE expires_at <= ?", [now]).changes);
    },
  };
}
