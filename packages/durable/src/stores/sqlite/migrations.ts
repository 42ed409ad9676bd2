/**
 * The SQLite store's schema, one numbered migration at a time. To change the schema, append
 * `{ version: n + 1, name, up }`; never edit a migration that has shipped (files already carry it).
 */
import type { SqliteMigration } from "@tackle/storage";

export const sqliteMigrations: readonly SqliteMigration[] = [
  {
    version: 1,
    name: "runs, journal, frames",
    // IF NOT EXISTS: files made before versioning already have these tables and are stamped version 1.
    up: `
CREATE TABLE IF NOT EXISTS durable_runs (
  thread_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, graph TEXT NOT NULL, status TEXT NOT NULL,
  state TEXT NOT NULL, node TEXT, cursor TEXT NOT NULL, interrupts TEXT NOT NULL, error TEXT,
  owner TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS durable_journal (
  thread_id TEXT NOT NULL, key TEXT NOT NULL, name TEXT NOT NULL, state TEXT NOT NULL,
  attempt INTEGER NOT NULL, value TEXT, PRIMARY KEY (thread_id, key)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS durable_frames (
  thread_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL,
  PRIMARY KEY (thread_id, seq)
) STRICT, WITHOUT ROWID;
`,
  },
  {
    version: 2,
    name: "running runs by their last write",
    // The recovery sweep's lookup (findStaleRuns) reads only running runs, oldest write first.
    up: "CREATE INDEX IF NOT EXISTS durable_runs_running ON durable_runs (updated_at) WHERE status = 'running';",
  },
  {
    version: 3,
    name: "open runs by thread",
    // The open-runs bound (ADR 0123) counts a tenant's running and paused runs by its id range.
    up: "CREATE INDEX IF NOT EXISTS durable_runs_open ON durable_runs (thread_id) WHERE status IN ('running', 'paused');",
  },
  {
    version: 4,
    name: "paused runs by approval expiry",
    // A runner loads the expiries of paused runs, soonest first, so they outlive the runner that paused
    // them (ADR 0124). Runs paused before this migration get theirs from their open approvals.
    up: `
ALTER TABLE durable_runs ADD COLUMN expires_at INTEGER;
UPDATE durable_runs SET expires_at = (
  SELECT min(CAST(round(unixepoch(json_extract(item.value, '$.request.expiresAt'), 'subsec') * 1000) AS INTEGER))
  FROM json_each(durable_runs.interrupts, '$.value') AS item
  WHERE json_extract(item.value, '$.request.kind') = 'approval'
    AND json_extract(item.value, '$.request.expiresAt') IS NOT NULL
) WHERE status = 'paused';
CREATE INDEX IF NOT EXISTS durable_runs_expiring ON durable_runs (expires_at, thread_id)
  WHERE status = 'paused' AND expires_at IS NOT NULL;
`,
  },
  {
    version: 5,
    name: "a counter of open runs per prefix",
    // The open-runs bound reads one counter per prefix instead of counting the prefix's open runs
    // (ADR 0127). Each open run stores the prefix it is counted under; runs open before this migration
    // are counted under their tenant's (`<tenant>/`, the id up to its first "/"), or "" when the id has
    // none, as `createDurableApp` names them. The count's index (version 3) is no longer read.
    up: `
ALTER TABLE durable_runs ADD COLUMN open_prefix TEXT;
UPDATE durable_runs SET open_prefix = substr(thread_id, 1, instr(thread_id, '/'))
  WHERE status IN ('running', 'paused');
CREATE TABLE IF NOT EXISTS durable_open_runs (prefix TEXT PRIMARY KEY, n INTEGER NOT NULL) STRICT, WITHOUT ROWID;
INSERT INTO durable_open_runs (prefix, n)
  SELECT open_prefix, count(*) FROM durable_runs WHERE open_prefix IS NOT NULL GROUP BY open_prefix;
DROP INDEX IF EXISTS durable_runs_open;
`,
  },
];
