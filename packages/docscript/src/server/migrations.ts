/**
 * The document stores' schemas, one numbered migration at a time, for SQLite and PostgreSQL. To
 * change a schema, append `{ version: n + 1, name, up }` to its list; never edit a migration that has
 * shipped (databases already carry it).
 */
import type { SqliteMigration } from "@tackle/storage";
import type { PostgresMigration } from "@tackle/storage/postgres";

/**
 * A relation row's position as the stores index and sort it (migration 10): its JSON's "position"
 * when that is text, else "" (as a projection reads it: `readRelationRow`). Queries name the same
 * expression, so the index serves them.
 */
export const sqlitePosition =
  "(CASE json_type(payload, '$.position') WHEN 'text' THEN json_extract(payload, '$.position') ELSE '' END)";
export const postgresPosition =
  "CASE WHEN jsonb_typeof(payload::jsonb -> 'position') = 'string' THEN payload::jsonb ->> 'position' ELSE '' END COLLATE \"C\"";

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
  {
    version: 2,
    name: "projected rows",
    // The document's rows as JSON, kept by every push in the transaction that appends its update, so a
    // server reads rows (and pages of them) without reading the whole Loro document. rows_seq is the
    // seq the rows hold through; NULL (a document stored before this migration) until a server reads
    // the document whole once and writes them.
    up: `
    ALTER TABLE docscript_documents ADD COLUMN rows_seq INTEGER;
    CREATE TABLE docscript_rows (
      document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
      root TEXT NOT NULL,
      row_id TEXT NOT NULL,
      kind TEXT NOT NULL,
      payload TEXT NOT NULL,
      endpoint0 TEXT,
      endpoint1 TEXT,
      version INTEGER NOT NULL,
      PRIMARY KEY (document_id, root, row_id)
    );
    CREATE INDEX docscript_rows_kind ON docscript_rows (document_id, root, kind, row_id);
    CREATE INDEX docscript_rows_endpoint0 ON docscript_rows (document_id, endpoint0) WHERE endpoint0 IS NOT NULL;
    CREATE INDEX docscript_rows_endpoint1 ON docscript_rows (document_id, endpoint1) WHERE endpoint1 IS NOT NULL;
  `,
  },
  {
    version: 3,
    name: "change log",
    // One row per stored push, kept when compaction drops the update; documents older than this
    // migration log only the pushes after it.
    up: `
    CREATE TABLE docscript_changes (
      document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
      seq INTEGER NOT NULL,
      status TEXT NOT NULL,
      actor TEXT,
      credential TEXT NOT NULL,
      peers TEXT NOT NULL,
      plan_ids TEXT NOT NULL,
      entities_created INTEGER NOT NULL,
      entities_changed INTEGER NOT NULL,
      entities_deleted INTEGER NOT NULL,
      relations_created INTEGER NOT NULL,
      relations_changed INTEGER NOT NULL,
      relations_deleted INTEGER NOT NULL,
      created_at TEXT NOT NULL,
      PRIMARY KEY (document_id, seq)
    );
  `,
  },
  {
    version: 4,
    name: "entities and relations of the rows, and the document's issues",
    // Every entity and relation a row projects to (an embedded entity and a slot relation live in their
    // holder's row), so a reader pages entities by kind and id, and finds relations by endpoint, without
    // the Loro document; the document's issues as JSON (NULL: unknown). Rows written before this are
    // written again (with their members) the next time a server opens the document.
    up: `
    ALTER TABLE docscript_documents ADD COLUMN issues TEXT;
    UPDATE docscript_documents SET rows_seq = NULL;
    CREATE TABLE docscript_members (
      document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
      type TEXT NOT NULL,
      member_id TEXT NOT NULL,
      kind TEXT NOT NULL,
      root TEXT NOT NULL,
      row_id TEXT NOT NULL,
      endpoint0 TEXT,
      endpoint1 TEXT,
      variant_of TEXT,
      identity TEXT,
      PRIMARY KEY (document_id, type, member_id, root, row_id)
    );
    CREATE INDEX docscript_members_kind ON docscript_members (document_id, type, kind, member_id);
    CREATE INDEX docscript_members_row ON docscript_members (document_id, root, row_id);
    CREATE INDEX docscript_members_endpoint0 ON docscript_members (document_id, endpoint0) WHERE endpoint0 IS NOT NULL;
    CREATE INDEX docscript_members_endpoint1 ON docscript_members (document_id, endpoint1) WHERE endpoint1 IS NOT NULL;
    CREATE INDEX docscript_members_variant ON docscript_members (document_id, variant_of) WHERE variant_of IS NOT NULL;
    CREATE INDEX docscript_members_identity ON docscript_members (document_id, identity) WHERE identity IS NOT NULL;
  `,
  },
  {
    version: 5,
    name: "rows state beside the document",
    // rows_seq and issues move to a table of their own: updating them on the documents row rewrote its
    // snapshot with it (SQLite writes a changed row whole, overflow pages included: 16 MB per push at
    // 100k entities).
    up: `
    CREATE TABLE docscript_projection (
      document_id TEXT PRIMARY KEY REFERENCES docscript_documents(document_id),
      rows_seq INTEGER,
      issues TEXT
    );
    INSERT INTO docscript_projection (document_id, rows_seq, issues)
      SELECT document_id, rows_seq, issues FROM docscript_documents;
    ALTER TABLE docscript_documents DROP COLUMN rows_seq;
    ALTER TABLE docscript_documents DROP COLUMN issues;
  `,
  },
  {
    version: 6,
    name: "entities and relations per kind",
    // How many entities and relations of each kind a document holds, kept by every write of its
    // members in the same transaction, so a page's totals are a few rows read, not a count over the
    // document (seconds at a million entities). Counted once here for documents stored before.
    up: `
    CREATE TABLE docscript_counts (
      document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
      type TEXT NOT NULL,
      kind TEXT NOT NULL,
      count INTEGER NOT NULL,
      PRIMARY KEY (document_id, type, kind)
    );
    INSERT INTO docscript_counts (document_id, type, kind, count)
      SELECT document_id, type, kind, count(*) FROM docscript_members GROUP BY document_id, type, kind;
  `,
  },
  {
    version: 7,
    name: "entities' number fields, for windows",
    // Every entity's number fields (a marker's startMs), one row each, kept by every write of its row's
    // members in the same transaction, so `entities.list({ entityKind, range })` reads a window from the
    // index (document, kind, field, value) instead of every entity of the kind. value NULL: a variant's
    // field taken from its base. Documents stored before are not indexed (numbers_indexed 0): a window
    // there reads every entity of the kind, until a server indexes them from the stored rows.
    up: `
    CREATE TABLE docscript_numbers (
      document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
      kind TEXT NOT NULL,
      field TEXT NOT NULL,
      value REAL,
      member_id TEXT NOT NULL,
      root TEXT NOT NULL,
      row_id TEXT NOT NULL
    );
    CREATE INDEX docscript_numbers_window ON docscript_numbers (document_id, kind, field, value, member_id);
    CREATE INDEX docscript_numbers_row ON docscript_numbers (document_id, root, row_id);
    ALTER TABLE docscript_projection ADD COLUMN numbers_indexed INTEGER NOT NULL DEFAULT 0;
  `,
  },
  {
    version: 8,
    name: "the snapshot's version",
    // The version vector of the stored snapshot, written with it (creation, compaction), so a page of a
    // document that is not open tells its version without reading the snapshot (ADR 0488). NULL for a
    // snapshot stored before: a server that loads the document writes it.
    up: "ALTER TABLE docscript_documents ADD COLUMN snapshot_version BLOB;",
  },
  {
    version: 9,
    name: "plan index",
    // Every plan id applied to a document and the version it took the document to, written with the
    // update that applied it, so a push's duplicate-plan check and a plan's state are one indexed read,
    // not a read of the document's history (44 s at 100k entities). plans_indexed: the table holds
    // every plan of the document's history (a document created since, or indexed once from its
    // history by a server that found it 0: documents stored before this migration).
    up: `
    CREATE TABLE docscript_plans (
      document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
      plan_id TEXT NOT NULL,
      version TEXT NOT NULL,
      PRIMARY KEY (document_id, plan_id)
    );
    ALTER TABLE docscript_projection ADD COLUMN plans_indexed INTEGER NOT NULL DEFAULT 0;
  `,
  },
  {
    version: 10,
    name: "relations' positions, for ordered neighbours",
    // The position of every relation row (its JSON's text "position", else ""), by holder (endpoint0)
    // and kind, so an append finds a holder's last ordered relation and a move its neighbours by index
    // (`MemberQuery.ordered`), not by reading every relation of a track of thousands of clips. An index
    // on an expression of the stored JSON: documents stored before are indexed as it is built.
    up: `
    CREATE INDEX docscript_rows_position ON docscript_rows
      (document_id, endpoint0, kind, ${sqlitePosition}, row_id)
      WHERE root = 'relations' AND endpoint0 IS NOT NULL;
  `,
  },
  {
    version: 11,
    name: "an endpoint's members in id order",
    // The members touching an entity, in the order a page of them answers (type, id, row): a page of
    // the relations of a track of 30,000 clips reads its first rows from the index, not all 30,000
    // sorted (ADR 0497). The same indexes with the order appended: every query of the old ones still
    // finds its prefix.
    up: `
    DROP INDEX docscript_members_endpoint0;
    DROP INDEX docscript_members_endpoint1;
    CREATE INDEX docscript_members_endpoint0 ON docscript_members
      (document_id, endpoint0, type, member_id, row_id) WHERE endpoint0 IS NOT NULL;
    CREATE INDEX docscript_members_endpoint1 ON docscript_members
      (document_id, endpoint1, type, member_id, row_id) WHERE endpoint1 IS NOT NULL;
  `,
  },
  {
    version: 12,
    name: "the snapshot in a table of its own",
    // SQLite stores a row's columns in order and reaches a column after a large blob by walking the
    // blob's overflow pages: snapshot_seq and snapshot_version came after the snapshot, so a page's head
    // of a document not open (and every push's seq) walked 17 MB at 100k entities (~6 ms a request).
    // The documents row keeps what is small; the snapshot moves to a table of its own.
    up: `
    CREATE TABLE docscript_snapshots (
      document_id TEXT PRIMARY KEY REFERENCES docscript_documents(document_id),
      snapshot BLOB NOT NULL
    );
    INSERT INTO docscript_snapshots (document_id, snapshot) SELECT document_id, snapshot FROM docscript_documents;
    ALTER TABLE docscript_documents DROP COLUMN snapshot;
  `,
  },
  {
    version: 13,
    name: "the rows' maps, by container id",
    // Where each map of a row sits (ADR 0514): its container id, its row, and the keys from the row's
    // map down to it (path, JSON text), written with the row in its transaction, so a server finds the
    // row a changed map belongs to by an indexed read, not by walking Loro's parents in the document.
    // The row index lets a row's write forget the maps it held. Rows stored before have no entries, as
    // rows written without their maps: a map not found is one the store does not know.
    up: `
    CREATE TABLE docscript_containers (
      document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
      container_id TEXT NOT NULL,
      root TEXT NOT NULL,
      row_id TEXT NOT NULL,
      path TEXT NOT NULL,
      PRIMARY KEY (document_id, container_id)
    );
    CREATE INDEX docscript_containers_row ON docscript_containers (document_id, root, row_id);
  `,
  },
  {
    version: 14,
    name: "a create's claim held under a lease",
    // Who holds a claimed id while its create writes (ADR 0562): a token of that create (claim_owner)
    // and the time, in ms since the epoch, until which its claim holds without being renewed
    // (lease_until). Every slice the create writes renews it; a claim past its lease is taken back by
    // the next open of the file or the next create of its id. NULL on rows from before: a claim left
    // by an older process counts as lapsed (as every claim did then, on open); a document has no use
    // for either.
    up: `
    ALTER TABLE docscript_documents ADD COLUMN claim_owner TEXT;
    ALTER TABLE docscript_documents ADD COLUMN lease_until INTEGER;
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
  {
    version: 2,
    name: "projected rows",
    // As for SQLite; row ids compare bytewise (COLLATE "C"), so pages walk ids in one order everywhere.
    up: `
  ALTER TABLE docscript_documents ADD COLUMN rows_seq BIGINT;
  CREATE TABLE docscript_rows (
    document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
    root TEXT NOT NULL,
    row_id TEXT COLLATE "C" NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    payload TEXT NOT NULL,
    endpoint0 TEXT COLLATE "C",
    endpoint1 TEXT COLLATE "C",
    version BIGINT NOT NULL,
    PRIMARY KEY (document_id, root, row_id)
  );
  CREATE INDEX docscript_rows_kind ON docscript_rows (document_id, root, kind, row_id);
  CREATE INDEX docscript_rows_endpoint0 ON docscript_rows (document_id, endpoint0) WHERE endpoint0 IS NOT NULL;
  CREATE INDEX docscript_rows_endpoint1 ON docscript_rows (document_id, endpoint1) WHERE endpoint1 IS NOT NULL;
`,
  },
  {
    version: 3,
    name: "change log",
    // As for SQLite.
    up: `
  CREATE TABLE docscript_changes (
    document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
    seq BIGINT NOT NULL,
    status TEXT NOT NULL,
    actor TEXT,
    credential TEXT NOT NULL,
    peers TEXT NOT NULL,
    plan_ids TEXT NOT NULL,
    entities_created INTEGER NOT NULL,
    entities_changed INTEGER NOT NULL,
    entities_deleted INTEGER NOT NULL,
    relations_created INTEGER NOT NULL,
    relations_changed INTEGER NOT NULL,
    relations_deleted INTEGER NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, seq)
  );
`,
  },
  {
    version: 4,
    name: "entities and relations of the rows, and the document's issues",
    // As for SQLite; ids compare bytewise (COLLATE "C").
    up: `
  ALTER TABLE docscript_documents ADD COLUMN issues TEXT;
  UPDATE docscript_documents SET rows_seq = NULL;
  CREATE TABLE docscript_members (
    document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
    type TEXT NOT NULL,
    member_id TEXT COLLATE "C" NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    root TEXT NOT NULL,
    row_id TEXT COLLATE "C" NOT NULL,
    endpoint0 TEXT COLLATE "C",
    endpoint1 TEXT COLLATE "C",
    variant_of TEXT COLLATE "C",
    identity TEXT,
    PRIMARY KEY (document_id, type, member_id, root, row_id)
  );
  CREATE INDEX docscript_members_kind ON docscript_members (document_id, type, kind, member_id);
  CREATE INDEX docscript_members_row ON docscript_members (document_id, root, row_id);
  CREATE INDEX docscript_members_endpoint0 ON docscript_members (document_id, endpoint0) WHERE endpoint0 IS NOT NULL;
  CREATE INDEX docscript_members_endpoint1 ON docscript_members (document_id, endpoint1) WHERE endpoint1 IS NOT NULL;
  CREATE INDEX docscript_members_variant ON docscript_members (document_id, variant_of) WHERE variant_of IS NOT NULL;
  CREATE INDEX docscript_members_identity ON docscript_members (document_id, identity) WHERE identity IS NOT NULL;
`,
  },
  {
    version: 5,
    name: "rows state beside the document",
    // As for SQLite: the rows' seq and the issues change with every push; the snapshot does not.
    up: `
  CREATE TABLE docscript_projection (
    document_id TEXT PRIMARY KEY REFERENCES docscript_documents(document_id),
    rows_seq BIGINT,
    issues TEXT
  );
  INSERT INTO docscript_projection (document_id, rows_seq, issues)
    SELECT document_id, rows_seq, issues FROM docscript_documents;
  ALTER TABLE docscript_documents DROP COLUMN rows_seq;
  ALTER TABLE docscript_documents DROP COLUMN issues;
`,
  },
  {
    version: 6,
    name: "entities and relations per kind",
    // As for SQLite.
    up: `
  CREATE TABLE docscript_counts (
    document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
    type TEXT NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (document_id, type, kind)
  );
  INSERT INTO docscript_counts (document_id, type, kind, count)
    SELECT document_id, type, kind, count(*) FROM docscript_members GROUP BY document_id, type, kind;
`,
  },
  {
    version: 7,
    name: "entities' number fields, for windows",
    // As for SQLite; ids compare bytewise (COLLATE "C").
    up: `
  CREATE TABLE docscript_numbers (
    document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
    kind TEXT COLLATE "C" NOT NULL,
    field TEXT COLLATE "C" NOT NULL,
    value DOUBLE PRECISION,
    member_id TEXT COLLATE "C" NOT NULL,
    root TEXT NOT NULL,
    row_id TEXT COLLATE "C" NOT NULL
  );
  CREATE INDEX docscript_numbers_window ON docscript_numbers (document_id, kind, field, value, member_id);
  CREATE INDEX docscript_numbers_row ON docscript_numbers (document_id, root, row_id);
  ALTER TABLE docscript_projection ADD COLUMN numbers_indexed BOOLEAN NOT NULL DEFAULT false;
`,
  },
  {
    version: 8,
    name: "the snapshot's version",
    // As for SQLite.
    up: "ALTER TABLE docscript_documents ADD COLUMN snapshot_version BYTEA;",
  },
  {
    version: 9,
    name: "plan index",
    // As for SQLite.
    up: `
  CREATE TABLE docscript_plans (
    document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
    plan_id TEXT NOT NULL,
    version TEXT NOT NULL,
    PRIMARY KEY (document_id, plan_id)
  );
  ALTER TABLE docscript_projection ADD COLUMN plans_indexed BOOLEAN NOT NULL DEFAULT false;
`,
  },
  {
    version: 10,
    name: "relations' positions, for ordered neighbours",
    // As for SQLite; positions compare bytewise (COLLATE "C").
    up: `
  CREATE INDEX docscript_rows_position ON docscript_rows
    (document_id, endpoint0, kind, (${postgresPosition}), row_id)
    WHERE root = 'relations' AND endpoint0 IS NOT NULL;
`,
  },
  {
    version: 11,
    name: "an endpoint's members in id order",
    // As for SQLite.
    up: `
  DROP INDEX docscript_members_endpoint0;
  DROP INDEX docscript_members_endpoint1;
  CREATE INDEX docscript_members_endpoint0 ON docscript_members
    (document_id, endpoint0, type, member_id, row_id) WHERE endpoint0 IS NOT NULL;
  CREATE INDEX docscript_members_endpoint1 ON docscript_members
    (document_id, endpoint1, type, member_id, row_id) WHERE endpoint1 IS NOT NULL;
`,
  },
  {
    version: 12,
    name: "the rows' maps, by container id",
    // As for SQLite (version 13 there); ids compare bytewise (COLLATE "C").
    up: `
  CREATE TABLE docscript_containers (
    document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
    container_id TEXT COLLATE "C" NOT NULL,
    root TEXT NOT NULL,
    row_id TEXT COLLATE "C" NOT NULL,
    path TEXT NOT NULL,
    PRIMARY KEY (document_id, container_id)
  );
  CREATE INDEX docscript_containers_row ON docscript_containers (document_id, root, row_id);
`,
  },
];
