/**
 * The PostgreSQL store's schema, one numbered migration at a time, for a table prefix. To change the
 * schema, append `{ version: n + 1, name, up }`; never edit a migration that has shipped.
 */
import type { PostgresMigration } from "@tackle/storage/postgres";

export function postgresMigrations(prefix: string): readonly PostgresMigration[] {
  const runs = `${prefix}runs`;
  const journal = `${prefix}journal`;
  const frames = `${prefix}frames`;
  const openRuns = `${prefix}open_runs`;
  return [
    {
      version: 1,
      name: "runs, journal, frames",
      // IF NOT EXISTS: databases made before versioning already have these tables and are stamped version 1.
      up: `
    CREATE TABLE IF NOT EXISTS ${runs} (
      thread_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, graph TEXT NOT NULL, status TEXT NOT NULL,
      state TEXT NOT NULL, node TEXT, cursor TEXT NOT NULL, interrupts TEXT NOT NULL, error TEXT,
      owner TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS ${journal} (
      thread_id TEXT NOT NULL, key TEXT NOT NULL, name TEXT NOT NULL, state TEXT NOT NULL,
      attempt INTEGER NOT NULL, value TEXT, PRIMARY KEY (thread_id, key));
    CREATE TABLE IF NOT EXISTS ${frames} (
      thread_id TEXT NOT NULL, seq BIGINT NOT NULL, type TEXT NOT NULL, data JSONB NOT NULL,
      PRIMARY KEY (thread_id, seq));
  `,
    },
    {
      version: 2,
      name: "running runs by their last write",
      // The recovery sweep's lookup (findStaleRuns) reads only running runs, oldest write first.
      up: `CREATE INDEX IF NOT EXISTS ${prefix}runs_running ON ${runs} (updated_at) WHERE status = 'running';`,
    },
    {
      version: 3,
      name: "open runs by thread",
      // The open-runs bound (ADR 0123) counts a tenant's running and paused runs by its id range, in
      // byte order ("C"), the order the range's end is computed in.
      up: `CREATE INDEX IF NOT EXISTS ${prefix}runs_open ON ${runs} (thread_id COLLATE "C")
        WHERE status IN ('running', 'paused');`,
    },
    {
      version: 4,
      name: "paused runs by approval expiry",
      // A runner loads the expiries of paused runs, soonest first, so they outlive the runner that paused
      // them (ADR 0124). Runs paused before this migration get theirs from their open approvals.
      up: `
    ALTER TABLE ${runs} ADD COLUMN IF NOT EXISTS expires_at BIGINT;
    UPDATE ${runs} SET expires_at = (
      SELECT min(round(extract(epoch FROM (item -> 'request' ->> 'expiresAt')::timestamptz) * 1000))::bigint
      FROM jsonb_array_elements(${runs}.interrupts::jsonb -> 'value') AS item
      WHERE item -> 'request' ->> 'kind' = 'approval' AND item -> 'request' ->> 'expiresAt' IS NOT NULL
    ) WHERE status = 'paused';
    CREATE INDEX IF NOT EXISTS ${prefix}runs_expiring ON ${runs} (expires_at, thread_id COLLATE "C")
      WHERE status = 'paused' AND expires_at IS NOT NULL;
  `,
    },
    {
      version: 5,
      name: "a counter of open runs per prefix",
      // The open-runs bound reads one counter per prefix instead of counting the prefix's open runs
      // (ADR 0127). Each open run stores the prefix it is counted under; runs open before this migration
      // are counted under their tenant's (`<tenant>/`, the id up to its first "/"), or "" when the id
      // has none, as `createDurableApp` names them. The count's index (version 3) is no longer read.
      up: `
    ALTER TABLE ${runs} ADD COLUMN IF NOT EXISTS open_prefix TEXT;
    UPDATE ${runs} SET open_prefix = left(thread_id, strpos(thread_id, '/'))
      WHERE status IN ('running', 'paused');
    CREATE TABLE IF NOT EXISTS ${openRuns} (prefix TEXT PRIMARY KEY, n INTEGER NOT NULL);
    INSERT INTO ${openRuns} (prefix, n)
      SELECT open_prefix, count(*) FROM ${runs} WHERE open_prefix IS NOT NULL GROUP BY open_prefix
      ON CONFLICT (prefix) DO UPDATE SET n = excluded.n;
    DROP INDEX IF EXISTS ${prefix}runs_open;
  `,
    },
  ];
}

/** The store's key in `tackle_migrations`: one history per table prefix. */
export function migrationStore(prefix: string): string {
  return prefix === "durable_" ? "durable" : `durable:${prefix}`;
}
