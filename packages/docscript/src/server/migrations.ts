/**
 * The document stores' schemas, one numbered migration at a time, for SQLite and PostgreSQL. To
 * change a schema, append `{ version: n + 1, name, up }` to its list; never edit a migration that has
 * shipped (databases already carry it).
 */
import type { SqliteMigration } from "@tackle/storage";
import type { PostgresMigration } from "@tackle/storage/postgres";

export const sqliteMigrations: readonly SqliteMigration[] = [
  {
    version: 1,
    name: "documents and update log",
    // IF NOT EXISTS: files made before versioning already have these tables and are stamped version 1.
    up: `
    CREATE TABLE IF NOT EXISTS docscript_documents (
      document_id TEXT PRIMARY KEY,
      token_hash TEXT NOT NULL,
      snapshot BLOB NOT NULL,
      snapshot_seq INTEGER NOT NULL,
      created_at TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS docscript_updates (
      document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
      seq INTEGER NOT NULL,
      bytes BLOB NOT NULL,
      status TEXT NOT NULL,
      actor TEXT,
      created_at TEXT NOT NULL,
      PRIMARY KEY (document_id, seq)
    );
  `,
  },
];

export const postgresMigrations: readonly PostgresMigration[] = [
  {
    version: 1,
    name: "documents and update log",
    // IF NOT EXISTS: databases made before versioning already have these tables and are stamped version 1.
    up: `
  CREATE TABLE IF NOT EXISTS docscript_documents (
    document_id TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL,
    snapshot BYTEA NOT NULL,
    snapshot_seq BIGINT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
  );
  CREATE TABLE IF NOT EXISTS docscript_updates (
    document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
    seq BIGINT NOT NULL,
    bytes BYTEA NOT NULL,
    status TEXT NOT NULL,
    actor TEXT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, seq)
  );
`,
  },
];
