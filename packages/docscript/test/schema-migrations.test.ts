/**
 * Both document stores open databases written before schema versioning and upgrade them without
 * losing a row; both refuse a database whose schema is newer than this code.
 */
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, describe, it } from "node:test";
import { migrateSqlite, StorageError } from "@tackle/storage";
import { migratePostgres } from "@tackle/storage/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import pg from "pg";
import { createSqliteDocumentStore } from "../src/server/index.ts";
import { postgresMigrations, sqliteMigrations } from "../src/server/migrations.ts";
import { createPostgresDocumentStore } from "../src/server/postgres/index.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-docscript-migrate-"));
const databases: TestDatabase[] = [];
after(async () => {
  rmSync(directory, { recursive: true, force: true });
  for (const database of databases) await database.drop().catch(() => undefined);
});

const tables = ["docscript_documents", "docscript_updates"];

/** A copy of the committed file written before versioning: doc-1 and doc-2, three logged updates each. */
function legacyCopy(name: string): string {
  const path = join(directory, name);
  copyFileSync(new URL("./fixtures/docscript-v0.db", import.meta.url), path);
  return path;
}

function counts(path: string): Record<string, number> {
  const database = new DatabaseSync(path);
  try {
    return Object.fromEntries(
      tables.map((table) => [
        table,
        Number((database.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n),
      ]),
    );
  } finally {
    database.close();
  }
}

/** Two documents at schema version 5: doc-1 with a track, two clips (one marker embedded) and a relation. */
const beforeCountsRows = `
  INSERT INTO docscript_documents (document_id, token_hash, snapshot, snapshot_seq, created_at)
    VALUES ('doc-1', 'h', '', 0, '2026-01-01'), ('doc-2', 'h', '', 0, '2026-01-01');
  INSERT INTO docscript_members (document_id, type, member_id, kind, root, row_id) VALUES
    ('doc-1', 'entity', 't', 'track', 'entities', 't'),
    ('doc-1', 'entity', 'c1', 'clip', 'entities', 'c1'),
    ('doc-1', 'entity', 'm1', 'sequence-marker', 'entities', 'c1'),
    ('doc-1', 'relation', 'c1/marker', 'marker', 'entities', 'c1'),
    ('doc-1', 'entity', 'c2', 'clip', 'entities', 'c2'),
    ('doc-1', 'relation', 'r1', 'contain', 'relations', 'r1');
`;
const expectedCounts = [
  { type: "entity", kind: "clip", count: 2 },
  { type: "entity", kind: "sequence-marker", count: 1 },
  { type: "entity", kind: "track", count: 1 },
  { type: "relation", kind: "contain", count: 1 },
  { type: "relation", kind: "marker", count: 1 },
];
const sortCounts = (rows: { type: string; kind: string; count: number }[]) =>
  [...rows].sort((left, right) => `${left.type}:${left.kind}`.localeCompare(`${right.type}:${right.kind}`));

const isTooNew = (error: unknown) => {
  assert.ok(StorageError.isInstance(error), String(error));
  assert.equal(error.code, "schema_too_new");
  return true;
};

describe("SQLite document store: schema versions", () => {
  it("upgrades a file written before versioning to the latest version without losing a row", async () => {
    const path = legacyCopy("legacy.db");
    const before = counts(path);
    assert.deepEqual(before, { docscript_documents: 2, docscript_updates: 6 });
    const store = createSqliteDocumentStore({ path });
    try {
      for (const d of [1, 2]) {
        const loaded = await store.load(`doc-${d}`);
        assert.equal(loaded?.tokenHash, `hash-${d}`);
        assert.deepEqual([...(loaded?.snapshot ?? [])], [d, 1, 2, 3]);
        assert.deepEqual(
          loaded?.updates.map((update) => [update.seq, ...update.bytes]),
          [
            [1, d, 1],
            [2, d, 2],
            [3, d, 3],
          ],
        );
      }
      // Rows are not kept for a document stored before they were: a server writes them on first open.
      assert.equal(await store.rowsSeq("doc-1"), undefined);
      assert.deepEqual(await store.readRows("doc-1", { root: "entities", limit: 10 }), []);
      await store.append({ documentId: "doc-1", seq: 4, bytes: new Uint8Array([9]), status: "committed" });
    } finally {
      await store.close();
    }
    assert.deepEqual(counts(path), { docscript_documents: 2, docscript_updates: 7 });
    const database = new DatabaseSync(path);
    assert.equal(
      (database.prepare("PRAGMA user_version").get() as { user_version: number }).user_version,
      sqliteMigrations.at(-1)?.version,
    );
    database.close();
  });

  it("counts the entities and relations per kind of documents stored before the counts were kept", async () => {
    const path = join(directory, "before-counts.db");
    const database = new DatabaseSync(path);
    migrateSqlite(database, { store: "docscript", migrations: sqliteMigrations.slice(0, 5) });
    database.exec(beforeCountsRows);
    database.close();
    const store = createSqliteDocumentStore({ path });
    try {
      assert.deepEqual(sortCounts(await store.countMembers("doc-1")), expectedCounts);
      assert.deepEqual(await store.countMembers("doc-2"), []);
    } finally {
      await store.close();
    }
  });

  it("keeps the snapshot out of the documents row, and a compaction replaces it only forward", async () => {
    // A column after a large blob is reached by walking the blob's pages (migration 12): the head a
    // page or a push reads (token, seq, version) is a row of its own.
    const path = legacyCopy("snapshot-apart.db");
    const store = createSqliteDocumentStore({ path });
    try {
      const big = new Uint8Array(2 ** 20).fill(7);
      assert.equal(await store.createDocument({ documentId: "doc-3", tokenHash: "h", snapshot: big }), true);
      assert.equal((await store.loadHead?.("doc-3"))?.snapshotSeq, 0);
      await store.compact("doc-3", new Uint8Array([5, 5]), 4);
      // Another server compacted less far: the stored snapshot stays.
      await store.compact("doc-3", new Uint8Array([3]), 2);
      const loaded = await store.load("doc-3");
      assert.deepEqual([...(loaded?.snapshot ?? [])], [5, 5]);
      assert.equal(loaded?.snapshotSeq, 4);
      assert.deepEqual([...((await store.load("doc-1"))?.snapshot ?? [])], [1, 1, 2, 3]);
    } finally {
      await store.close();
    }
    const database = new DatabaseSync(path);
    const columns = database.prepare("PRAGMA table_info(docscript_documents)").all() as { name: string }[];
    database.close();
    assert.deepEqual(
      columns.map((column) => column.name).filter((name) => name === "snapshot"),
      [],
      "the documents row holds no snapshot",
    );
  });

  it("refuses a file whose schema is newer than this code, leaving it as it was", async () => {
    const path = legacyCopy("newer.db");
    await createSqliteDocumentStore({ path }).close();
    const database = new DatabaseSync(path);
    database.exec("PRAGMA user_version = 99");
    database.close();
    assert.throws(() => createSqliteDocumentStore({ path }), isTooNew);
    assert.deepEqual(counts(path), { docscript_documents: 2, docscript_updates: 6 });
  });
});

describe("PostgreSQL document store: schema versions", () => {
  /** The tables exactly as the store created them before versioning. */
  const legacyDdl = `
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
  );`;

  async function legacyDatabase(): Promise<{ url: string; client: pg.Client }> {
    const database = await createTestDatabase("tackle_docscript_migrate");
    databases.push(database);
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    await client.query(legacyDdl);
    await client.query(
      "INSERT INTO docscript_documents (document_id, token_hash, snapshot, snapshot_seq) VALUES ('doc-1', 'hash-1', '\\x01020304', 0)",
    );
    await client.query(
      "INSERT INTO docscript_updates (document_id, seq, bytes, status) VALUES ('doc-1', 1, '\\x0a', 'committed'), ('doc-1', 2, '\\x0b', 'committed')",
    );
    return { url: database.url, client };
  }

  async function pgCounts(client: pg.Client): Promise<Record<string, number>> {
    const result: Record<string, number> = {};
    for (const table of tables) {
      result[table] = (await client.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n;
    }
    return result;
  }

  it("upgrades tables created before versioning without losing a row, and records each version", async () => {
    const { url, client } = await legacyDatabase();
    try {
      const before = await pgCounts(client);
      assert.deepEqual(before, { docscript_documents: 1, docscript_updates: 2 });
      const store = await createPostgresDocumentStore({ connectionString: url });
      try {
        const loaded = await store.load("doc-1");
        assert.deepEqual([...(loaded?.snapshot ?? [])], [1, 2, 3, 4]);
        assert.deepEqual(
          loaded?.updates.map((update) => [update.seq, ...update.bytes]),
          [
            [1, 10],
            [2, 11],
          ],
        );
        assert.equal(await store.rowsSeq("doc-1"), undefined);
      } finally {
        await store.close();
      }
      assert.deepEqual(await pgCounts(client), before);
      const recorded = await client.query("SELECT store, version FROM tackle_migrations ORDER BY version");
      assert.deepEqual(
        recorded.rows,
        postgresMigrations.map((migration) => ({ store: "docscript", version: migration.version })),
      );
    } finally {
      await client.end();
    }
  });

  it("counts the entities and relations per kind of documents stored before the counts were kept", async () => {
    const database = await createTestDatabase("tackle_docscript_counts");
    databases.push(database);
    const pool = new pg.Pool({ connectionString: database.url, max: 1 });
    try {
      await migratePostgres(pool, { store: "docscript", migrations: postgresMigrations.slice(0, 5) });
      await pool.query(beforeCountsRows);
    } finally {
      await pool.end();
    }
    const store = await createPostgresDocumentStore({ connectionString: database.url });
    try {
      assert.deepEqual(sortCounts(await store.countMembers("doc-1")), expectedCounts);
      assert.deepEqual(await store.countMembers("doc-2"), []);
    } finally {
      await store.close();
    }
  });

  it("refuses tables migrated by newer code", async () => {
    const { url, client } = await legacyDatabase();
    try {
      await (await createPostgresDocumentStore({ connectionString: url })).close();
      await client.query(
        "INSERT INTO tackle_migrations (store, version, name) VALUES ('docscript', 99, 'future')",
      );
      await assert.rejects(createPostgresDocumentStore({ connectionString: url }), isTooNew);
      assert.deepEqual(await pgCounts(client), { docscript_documents: 1, docscript_updates: 2 });
    } finally {
      await client.end();
    }
  });
});
