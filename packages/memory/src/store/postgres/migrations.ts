/**
 * The PostgreSQL store's schema, one numbered migration at a time. To change the schema, append
 * `{ version: n + 1, name, up }`; never edit a migration that has shipped.
 */
import type { PostgresMigration } from "@tackle/storage/postgres";
import { postgresSchema } from "./schema.ts";

export const postgresMigrations: readonly PostgresMigration[] = [
  {
    version: 1,
    name: "memories, events, knowledge, blocks, traces, jobs",
    // IF NOT EXISTS: databases made before versioning already have these tables and are stamped version 1.
    up: postgresSchema,
  },
  {
    version: 2,
    name: "job leases",
    // Jobs are claimed by any process with a lease by the database's clock (see jobLeases).
    up: `
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS lease_owner TEXT;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS lease_until TIMESTAMPTZ;
CREATE INDEX IF NOT EXISTS jobs_claimable ON jobs(status, seq) WHERE status IN ('queued', 'running');
`,
  },
  {
    version: 3,
    name: "neighbouring turns by scope and write order",
    // A turn's neighbours are the nearest active rows of its scope before and after it: an ordered
    // range of this index instead of a scan of the rows written around it by every scope.
    up: `
CREATE INDEX IF NOT EXISTS memories_scope_seq ON memories(tenant_id, scope_key, seq) WHERE status = 'active';
`,
  },
  {
    version: 4,
    name: "idempotency keys of writes",
    // Per tenant: the key of a write, a hash of its request, and the answer once given; swept when expired.
    up: `
CREATE TABLE IF NOT EXISTS idempotency_keys (
  tenant_id TEXT NOT NULL,
  key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  answer TEXT,
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  PRIMARY KEY (tenant_id, key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_expiry ON idempotency_keys(expires_at);
`,
  },
  {
    version: 5,
    name: "the scope of each idempotency record",
    // A purge of a scope deletes the answers of writes made for it (ADR 0365).
    up: `
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS user_id TEXT;
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS agent_id TEXT;
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS session_id TEXT;
CREATE INDEX IF NOT EXISTS idempotency_keys_user ON idempotency_keys(tenant_id, user_id);
`,
  },
];
