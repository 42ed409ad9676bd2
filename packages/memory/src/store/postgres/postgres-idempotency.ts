/** Idempotency keys of writes, each kept with its answer until it expires. */
import { MEMORY_SCOPE_VALUES } from "../../scope/memory-scope.ts";
import type { MemoryStore } from "../memory-store.ts";
import { idempotencyFromRow } from "../row-codec.ts";
import type { PostgresContext } from "./postgres-sql.ts";

export function postgresIdempotency(
  context: PostgresContext,
): Pick<MemoryStore, "findIdempotencyKey" | "recordIdempotencyKey" | "sweepIdempotencyKeys"> {
  const { db, one } = context;
  return {
    async findIdempotencyKey(tenantId, key, now) {
      const row = await one(
        "SELECT * FROM memory_idempotency_keys WHERE tenant_id = $1 AND key = $2 AND expires_at > $3",
        [tenantId, key, now],
      );
      return row ? idempotencyFromRow(row) : undefined;
    },

    async recordIdempotencyKey(record) {
      // A new key, or one whose record expired (replaced in place). A concurrent transaction that
      // recorded the key first holds its index entry: this waits for it to commit (then false) or
      // roll back (then true).
      const result = await db().query(
        `INSERT INTO memory_idempotency_keys (tenant_id, key, fingerprint, answer, created_at, expires_at, user_id, agent_id, session_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (tenant_id, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, answer = EXCLUDED.answer,
           created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at, user_id = EXCLUDED.user_id,
           agent_id = EXCLUDED.agent_id, session_id = EXCLUDED.session_id
         WHERE memory_idempotency_keys.expires_at <= EXCLUDED.created_at`,
        [
          record.tenantId,
          record.key,
          record.fingerprint,
          record.answer,
          record.createdAt,
          record.expiresAt,
          ...MEMORY_SCOPE_VALUES.map((field) => record.scope[field] ?? null),
        ],
      );
      return result.rowCount === 1;
    },

    async sweepIdempotencyKeys(now) {
      const result = await db().query("DELETE FROM memory_idempotency_keys WHERE expires_at <= $1", [now]);
      return result.rowCount ?? 0;
    },
  };
}
