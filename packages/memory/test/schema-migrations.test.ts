/**
 * Both stores open databases written before schema versioning and upgrade them without losing a
 * row; both refuse a database whose schema is newer than this code.
 */
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, describe, it } from "node:test";
import { createSqliteStore, type MemoryStore } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { StorageError } from "@tackle/storage";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import pg from "pg";
import { postgresSchema } from "../src/store/postgres/schema.ts";
import {
  checkPostgresStampsNewRows,
  checkPostgresUsageAndNames,
  checkPostgresUserIndexes,
  checkSqliteSchema,
  checkSqliteStampsNewRows,
} from "./support/schema-migration-checks.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-migrate-"));
const databases: TestDatabase[] = [];
after(async () => {
  rmSync(directory, { recursive: true, force: true });
  for (const database of databases) await database.drop().catch(() => undefined);
});

const tables = ["memories", "memory_history", "events", "documents", "chunks"];
/** A table's name since migration 6 (SQLite) and 7 (PostgreSQL): every name carries `memory_` (ADR 0371). */
const prefixed = (table: string) => (table.startsWith("memory_") ? table : `memory_${table}`);

/**
 * A copy of the committed file written by the store before versioning: tenant-a has two memories of
 * user u1, two events and one document; tenant-b one memory.
 */
function legacyCopy(name: string): string {
  const path = join(directory, name);
  copyFileSync(new URL("./fixtures/memory-v0.db", import.meta.url), path);
  return path;
}

/** Rows per table, keyed by the old names; `names` says which names the file has. */
function counts(path: string, names: (table: string) => string = prefixed): Record<string, number> {
  const database = new DatabaseSync(path);
  try {
    return Object.fromEntries(
      tables.map((table) => [
        table,
        Number((database.prepare(`SELECT count(*) AS n FROM ${names(table)}`).get() as { n: number }).n),
      ]),
    );
  } finally {
    database.close();
  }
}

/**
 * Access records as the stores wrote them before migration 7 (SQLite) and 8 (PostgreSQL): a row per
 * search (no memory), per hit and per read. Those migrations sum them into a count per day, kind,
 * scope and memory (ADR 0537): `accessTrends` and `countSearches` answer what they answered.
 */
const oldAccessRows: [string, string | null, string | null, string, string | null, string][] = [
  ["tenant-a", "u1", "s1", "search", null, "2026-11-29"],
  ["tenant-a", "u1", "s1", "search", null, "2026-11-29"],
  ["tenant-a", "u1", "s1", "hit", "m-0", "2026-11-29"],
  ["tenant-a", "u1", "s1", "hit", "m-0", "2026-11-29"],
  ["tenant-a", "u1", null, "hit", "m-0", "2026-11-29"],
  ["tenant-a", "u1", null, "read", "m-1", "2026-11-29"],
  ["tenant-a", "u1", "s2", "search", null, "2026-11-30"],
  ["tenant-a", null, null, "search", null, "2026-11-30"],
  ["tenant-b", "u2", null, "search", null, "2026-11-30"],
];

async function checkAccessAfterMigration(store: MemoryStore): Promise<void> {
  assert.deepEqual(await store.accessTrends("tenant-a", { userId: "u1" }, "2026-11-01"), [
    { day: "2026-11-29", searches: 2, hits: 3, reads: 1 },
    { day: "2026-11-30", searches: 1, hits: 0, reads: 0 },
  ]);
  assert.deepEqual(await store.accessTrends("tenant-a", {}, "2026-11-30"), [
    { day: "2026-11-30", searches: 2, hits: 0, reads: 0 },
  ]);
  assert.equal(await store.countSearches("tenant-a", { sessionId: "s1" }), 2);
  assert.equal(await store.countSearches("tenant-b", {}), 1);
  // A search after the migration adds to the count the old rows were summed into.
  await store.insertTrace(
    {
      id: "trace-after-migration",
      tenantId: "tenant-a",
      userId: "u1",
      sessionId: "s1",
      operation: "search",
      query: "tea",
      ranking: "bm25",
      results: [],
      durationMs: 1,
      createdAt: "2026-11-29T18:00:00.000Z",
    },
    [
      {
        kind: "search",
        scope: { userId: "u1", sessionId: "s1" },
        memoryIds: [],
        at: "2026-11-29T18:00:00.000Z",
      },
    ],
  );
  assert.equal(await store.countSearches("tenant-a", { sessionId: "s1" }), 3);
}

const isTooNew = (error: unknown) => {
  assert.ok(StorageError.isInstance(error), String(error));
  assert.equal(error.code, "schema_too_new");
  return true;
};

/** The UTF-8 bytes of the metadata JSON `tenant`'s history, event and document rows hold in the file (`{}` none). */
function metadataTextBytes(path: string, tenant: string): number {
  const database = new DatabaseSync(path);
  try {
    const sums = ["memory_history", "memory_events", "memory_documents"].map(
      (table) =>
        `(SELECT coalesce(sum(CASE WHEN metadata = '{}' THEN 0 ELSE length(CAST(metadata AS BLOB)) END), 0)
          FROM ${table} WHERE tenant_id = ?)`,
    );
    const row = database.prepare(`SELECT ${sums.join(" + ")} AS n`).get(tenant, tenant, tenant) as {
      n: number;
    };
    return Number(row.n);
  } finally {
    database.close();
  }
}

describe("SQLite store: schema versions", () => {
  it("upgrades a file written before versioning to the latest version without losing a row, still searchable", async () => {
    const path = legacyCopy("legacy.db");
    const before = counts(path, (table) => table);
    assert.deepEqual(before, { memories: 3, memory_history: 3, events: 2, documents: 1, chunks: 1 });
    const legacy = new DatabaseSync(path);
    const insert = legacy.prepare(
      "INSERT INTO access_log (tenant_id, user_id, session_id, kind, memory_id, day) VALUES (?, ?, ?, ?, ?, ?)",
    );
    for (const row of oldAccessRows) insert.run(...row);
    legacy.close();
    const store = createSqliteStore({ path });
    try {
      await checkAccessAfterMigration(store);
      // Migrations 12, 14 and 15 (ADRs 0556, 0559, 0563): the metadata of the rows kept is counted, as
      // the JSON text they hold; this file's rows hold `{}` only, which costs nothing.
      const metadataText = metadataTextBytes(path, "tenant-a");
      assert.equal((await store.usage("tenant-a")).metadataBytes, metadataText);
      const memories = await store.listMemories("tenant-a", { userId: "u1" }, { limit: 10, order: "recent" });
      assert.deepEqual(memories.map((memory) => memory.content).sort(), [
        "Lives in Lisbon near the river",
        "Prefers short answers in English",
      ]);
      const found = await store.searchMemories("tenant-a", { userId: "u1" }, ["lisbon"], { limit: 5 });
      assert.deepEqual(
        found.map((hit) => hit.memory.content),
        ["Lives in Lisbon near the river"],
      );
      const events = await store.listEvents("tenant-a", { sessionId: "s1" }, { order: "asc", limit: 10 });
      assert.deepEqual(
        events.map((event) => event.content),
        ["hello there", "hi"],
      );
      assert.equal(
        (await store.listMemories("tenant-b", { userId: "u2" }, { limit: 10, order: "recent" })).length,
        1,
      );
      // Migration 6 made the chunk index again over the renamed table: the old chunk is found.
      const chunks = await store.searchChunks("tenant-a", {}, ["stalls"], 5);
      assert.deepEqual(
        chunks.map((hit) => hit.chunk.content),
        ["Restart the worker when the queue stalls."],
      );
      await checkSqliteStampsNewRows(store);
    } finally {
      await store.close();
    }
    // Every row kept, and the one written after the rename with its first version.
    const added = { memories: before.memories! + 1, memory_history: before.memory_history! + 1 };
    assert.deepEqual(counts(path), { ...before, ...added });
    checkSqliteSchema(path);
  });

  it("refuses a file whose schema is newer than this code, leaving it as it was", async () => {
    const path = legacyCopy("newer.db");
    await createSqliteStore({ path }).close();
    const database = new DatabaseSync(path);
    database.exec("PRAGMA user_version = 99");
    database.close();
    assert.throws(() => createSqliteStore({ path }), isTooNew);
    assert.equal(counts(path).memories, 3);
  });
});

/** Tables exactly as the store created them before versioning (that DDL is migration 1, unchanged). */
async function legacyDatabase(): Promise<{ url: string; client: pg.Client }> {
  const database = await createTestDatabase("tackle_memory_migrate");
  databases.push(database);
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  await client.query(postgresSchema);
  const at = "2026-11-30T12:00:00.000Z";
  for (const [index, content] of ["Prefers tea over coffee", "Lives in Lisbon near the river"].entries()) {
    await client.query(
      `INSERT INTO memories (id, tenant_id, user_id, scope_key, kind, content, dedupe_key, metadata, provenance,
         version, status, importance, helpful, unhelpful, successes, failures, access_count, created_at, updated_at)
       VALUES ($1, 'tenant-a', 'u1', 'u:u1', 'fact', $2, $3, '{}', '{"source":"api","eventIds":[],"derivedFrom":[]}',
         1, 'active', 0.5, 0, 0, 0, 0, 0, $4, $4)`,
      [`m-${index}`, content, `d-${index}`, at],
    );
  }
  await client.query(
    `INSERT INTO events (id, tenant_id, role, content, session_id, metadata, source, occurred_at, created_at)
     VALUES ('e-1', 'tenant-a', 'user', 'hello there', 's1', '{}', 'api', $1, $1)`,
    [at],
  );
  for (const row of oldAccessRows) {
    await client.query(
      "INSERT INTO access_log (tenant_id, user_id, session_id, kind, memory_id, day) VALUES ($1, $2, $3, $4, $5, $6)",
      row,
    );
  }
  return { url: database.url, client };
}

/** Rows per table in the PostgreSQL database, keyed by the old names; `names` says which it has. */
async function pgCounts(
  client: pg.Client,
  names: (table: string) => string = prefixed,
): Promise<Record<string, number>> {
  const result: Record<string, number> = {};
  for (const table of tables) {
    result[table] = (await client.query(`SELECT count(*)::int AS n FROM ${names(table)}`)).rows[0].n;
  }
  return result;
}

describe("PostgreSQL store: schema versions", () => {
  it("upgrades tables created before versioning without losing a row, and records every version", async () => {
    const { url, client } = await legacyDatabase();
    try {
      const before = await pgCounts(client, (table) => table);
      assert.equal(before.memories, 2);
      const store = await createPostgresStore({ connectionString: url });
      try {
        await checkAccessAfterMigration(store);
        const found = await store.searchMemories("tenant-a", { userId: "u1" }, ["lisbon"], { limit: 5 });
        assert.deepEqual(
          found.map((hit) => hit.memory.content),
          ["Lives in Lisbon near the river"],
        );
        const events = await store.listEvents("tenant-a", { sessionId: "s1" }, { order: "asc", limit: 10 });
        assert.deepEqual(
          events.map((event) => event.content),
          ["hello there"],
        );
        await checkPostgresStampsNewRows(store);
      } finally {
        await store.close();
      }
      const added = { memories: before.memories! + 1, memory_history: before.memory_history! + 1 };
      assert.deepEqual(await pgCounts(client), { ...before, ...added });
      const recorded = await client.query("SELECT store, version FROM tackle_migrations ORDER BY version");
      assert.deepEqual(recorded.rows, [
        { store: "memory", version: 1 },
        { store: "memory", version: 2 },
        { store: "memory", version: 3 },
        { store: "memory", version: 4 },
        { store: "memory", version: 5 },
        { store: "memory", version: 6 },
        { store: "memory", version: 7 },
        { store: "memory", version: 8 },
        { store: "memory", version: 9 },
        { store: "memory", version: 10 },
        { store: "memory", version: 11 },
        { store: "memory", version: 12 },
        { store: "memory", version: 13 },
        { store: "memory", version: 14 },
        { store: "memory", version: 15 },
        { store: "memory", version: 16 },
        { store: "memory", version: 17 },
      ]);
      await checkPostgresUserIndexes(client);
      await checkPostgresUsageAndNames(client);
    } finally {
      await client.end();
    }
  });

  it("refuses tables migrated by newer code", async () => {
    const { url, client } = await legacyDatabase();
    try {
      await (await createPostgresStore({ connectionString: url })).close();
      await client.query(
        "INSERT INTO tackle_migrations (store, version, name) VALUES ('memory', 99, 'future')",
      );
      await assert.rejects(createPostgresStore({ connectionString: url }), isTooNew);
      assert.equal((await pgCounts(client)).memories, 2);
    } finally {
      await client.end();
    }
  });
});
