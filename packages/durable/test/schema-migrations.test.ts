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
import type { DurableStore, RunRecord } from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createSqliteStore } from "@tackle/durable/sqlite";
import { StorageError } from "@tackle/storage";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import pg from "pg";

const directory = mkdtempSync(join(tmpdir(), "tackle-durable-migrate-"));
const databases: TestDatabase[] = [];
after(async () => {
  rmSync(directory, { recursive: true, force: true });
  for (const database of databases) await database.drop().catch(() => undefined);
});

const tables = ["durable_runs", "durable_journal", "durable_frames"];

/** A run paused at two approvals (and a plain interrupt) as codec text, before expiries had a column. */
const pausedInterrupts = JSON.stringify({
  v: 1,
  value: [
    { id: "a", request: { kind: "approval", expiresAt: "2030-01-02T03:04:05.678Z" } },
    { id: "b", request: { kind: "approval", expiresAt: "2030-01-02T03:04:05.006Z" } },
    { id: "c", request: { question: "why?" } },
  ],
});
const pausedExpiry = Date.parse("2030-01-02T03:04:05.006Z");
const expiringQuery = { dueBy: Date.parse("2031-01-01T00:00:00Z"), graphs: ["orders"], limit: 10 };

/** A copy of the committed file written by the store before versioning (3 runs, 3 journal records, 6 frames). */
function legacyCopy(name: string): string {
  const path = join(directory, name);
  copyFileSync(new URL("./fixtures/durable-v0.db", import.meta.url), path);
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

/** Runs stored before version 5: two tenants' open and ended runs, and ids with no tenant. */
const openRunsBefore = [
  ["acme/a", "paused"],
  ["acme/b", "running"],
  ["acme/c", "completed"],
  ["globex/a", "paused"],
  ["globex/b", "cancelled"],
  ["plain", "paused"],
] as const;

/**
 * The counters version 5 filled: each tenant's open runs, ids without a tenant under "" (with the
 * fixture's `unprefixed` running runs), and a start checked against them.
 */
async function assertOpenCounts(store: DurableStore, unprefixed = 3): Promise<void> {
  assert.deepEqual(await store.recountOpenRuns(), [
    { prefix: "", counter: 1 + unprefixed, recounted: 1 + unprefixed },
    { prefix: "acme/", counter: 2, recounted: 2 },
    { prefix: "globex/", counter: 1, recounted: 1 },
  ]);
  const run = (threadId: string): RunRecord => ({
    threadId,
    runId: "run",
    graph: "gate",
    status: "running",
    state: "{}",
    node: "ask",
    cursor: "{}",
    interrupts: "[]",
    error: null,
    owner: "o",
    createdAt: "now",
    updatedAt: "now",
  });
  await assert.rejects(
    store.createRun(run("acme/d"), {}, { openLimit: { prefix: "acme/", max: 2 } }),
    /too_many_open_runs|maxOpenRuns/,
  );
  await store.createRun(run("globex/c"), {}, { openLimit: { prefix: "globex/", max: 2 } });
  // Ending a run counted by the migration gives its place back.
  await store.commit("acme/a", "o", { run: { status: "cancelled" } });
  await store.createRun(run("acme/d"), {}, { openLimit: { prefix: "acme/", max: 2 } });
  assert.deepEqual(
    (await store.recountOpenRuns()).filter((count) => count.prefix !== ""),
    [
      { prefix: "acme/", counter: 2, recounted: 2 },
      { prefix: "globex/", counter: 2, recounted: 2 },
    ],
  );
}

const isTooNew = (error: unknown) => {
  assert.ok(StorageError.isInstance(error), String(error));
  assert.equal(error.code, "schema_too_new");
  return true;
};

describe("SQLite store: schema versions", () => {
  it("upgrades a file written before versioning to the newest version without losing a row", async () => {
    const path = legacyCopy("legacy.db");
    const before = counts(path);
    assert.deepEqual(before, { durable_runs: 3, durable_journal: 3, durable_frames: 6 });
    const store = createSqliteStore({ path });
    try {
      for (const i of [1, 2, 3]) {
        const run = await store.getRun(`thread-${i}`);
        assert.equal(run?.runId, `run-${i}`);
        assert.equal(run?.state, JSON.stringify({ step: i }));
        assert.deepEqual(await store.readJournal(`thread-${i}`), [
          {
            key: `call-${i}`,
            name: "orders.get",
            state: "done",
            attempt: 1,
            value: JSON.stringify({ id: i }),
          },
        ]);
        assert.deepEqual(
          (await store.readFrames(`thread-${i}`, 0)).map((frame) => frame.data),
          [
            { name: "orders.get", i },
            { ok: true, i },
          ],
        );
      }
      // The upgraded file takes writes as before.
      await store.commit("thread-1", "owner-a", {
        frames: [{ seq: 3, type: "tool_call", data: { after: true } }],
      });
    } finally {
      await store.close();
    }
    const database = new DatabaseSync(path);
    assert.equal((database.prepare("PRAGMA user_version").get() as { user_version: number }).user_version, 5);
    database.close();
    assert.deepEqual(counts(path), { ...before, durable_frames: 7 });
  });

  it("version 4 gives a run paused before it its soonest approval expiry (ADR 0124)", async () => {
    const path = legacyCopy("paused.db");
    const legacy = new DatabaseSync(path);
    legacy
      .prepare(
        "INSERT INTO durable_runs VALUES (?, 'run-p', 'orders', 'paused', '{}', 'ask', '{}', ?, NULL, 'o', 'then', 'then')",
      )
      .run("thread-paused", pausedInterrupts);
    legacy.close();
    const store = createSqliteStore({ path });
    try {
      assert.deepEqual(await store.findExpiringRuns(expiringQuery), [
        { threadId: "thread-paused", expiresAt: pausedExpiry },
      ]);
    } finally {
      await store.close();
    }
  });

  it("version 5 counts the runs open before it under their tenant's prefix (ADR 0127)", async () => {
    const path = legacyCopy("open.db");
    const legacy = new DatabaseSync(path);
    const insert = legacy.prepare(
      "INSERT INTO durable_runs VALUES (?, 'run', 'gate', ?, '{}', 'ask', '{}', '[]', NULL, 'o', 'then', 'then')",
    );
    for (const [threadId, status] of openRunsBefore) insert.run(threadId, status);
    legacy.close();
    const store = createSqliteStore({ path });
    try {
      await assertOpenCounts(store);
    } finally {
      await store.close();
    }
  });

  it("refuses a file whose schema is newer than this code, leaving it as it was", async () => {
    const path = legacyCopy("newer.db");
    createSqliteStore({ path }).close();
    const database = new DatabaseSync(path);
    database.exec("PRAGMA user_version = 99");
    database.close();
    assert.throws(() => createSqliteStore({ path }), isTooNew);
    assert.deepEqual(counts(path), { durable_runs: 3, durable_journal: 3, durable_frames: 6 });
  });
});

/** The tables exactly as the store created them before versioning. */
const legacyDdl = `
  CREATE TABLE IF NOT EXISTS durable_runs (
    thread_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, graph TEXT NOT NULL, status TEXT NOT NULL,
    state TEXT NOT NULL, node TEXT, cursor TEXT NOT NULL, interrupts TEXT NOT NULL, error TEXT,
    owner TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS durable_journal (
    thread_id TEXT NOT NULL, key TEXT NOT NULL, name TEXT NOT NULL, state TEXT NOT NULL,
    attempt INTEGER NOT NULL, value TEXT, PRIMARY KEY (thread_id, key));
  CREATE TABLE IF NOT EXISTS durable_frames (
    thread_id TEXT NOT NULL, seq BIGINT NOT NULL, type TEXT NOT NULL, data JSONB NOT NULL,
    PRIMARY KEY (thread_id, seq));`;

async function legacyDatabase(): Promise<{ url: string; client: pg.Client }> {
  const database = await createTestDatabase("tackle_durable_migrate");
  databases.push(database);
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  await client.query(legacyDdl);
  for (const i of [1, 2]) {
    await client.query(
      `INSERT INTO durable_runs VALUES ($1, $2, 'orders', 'running', '{}', NULL, '{}', '[]', NULL, 'owner-a', 'then', 'then')`,
      [`thread-${i}`, `run-${i}`],
    );
    await client.query(
      `INSERT INTO durable_journal VALUES ($1, 'call', 'orders.get', 'done', 1, '{"id":7}')`,
      [`thread-${i}`],
    );
    await client.query(
      `INSERT INTO durable_frames VALUES ($1, 1, 'tool_call', '{"n":1}'), ($1, 2, 'tool_result', '{"n":2}')`,
      [`thread-${i}`],
    );
  }
  return { url: database.url, client };
}

async function pgCounts(client: pg.Client): Promise<Record<string, number>> {
  const result: Record<string, number> = {};
  for (const table of tables)
    result[table] = (await client.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n;
  return result;
}

describe("PostgreSQL store: schema versions", () => {
  it("upgrades tables created before versioning without losing a row, and records each version", async () => {
    const { url, client } = await legacyDatabase();
    try {
      const before = await pgCounts(client);
      assert.deepEqual(before, { durable_runs: 2, durable_journal: 2, durable_frames: 4 });
      const store = await createPostgresStore({ connectionString: url });
      try {
        assert.equal((await store.getRun("thread-2"))?.runId, "run-2");
        assert.deepEqual(await store.readJournal("thread-1"), [
          { key: "call", name: "orders.get", state: "done", attempt: 1, value: '{"id":7}' },
        ]);
        assert.deepEqual(
          (await store.readFrames("thread-1", 0)).map((frame) => frame.data),
          [{ n: 1 }, { n: 2 }],
        );
      } finally {
        await store.close();
      }
      assert.deepEqual(await pgCounts(client), before);
      const recorded = await client.query("SELECT store, version FROM tackle_migrations ORDER BY version");
      assert.deepEqual(recorded.rows, [
        { store: "durable", version: 1 },
        { store: "durable", version: 2 },
        { store: "durable", version: 3 },
        { store: "durable", version: 4 },
        { store: "durable", version: 5 },
      ]);
      // Version 2: the recovery sweep's index of running runs.
      const index = await client.query(
        "SELECT indexdef FROM pg_indexes WHERE tablename = 'durable_runs' AND indexname = 'durable_runs_running'",
      );
      assert.match(String(index.rows[0]?.indexdef), /WHERE \(status = 'running'::text\)/);
      // Version 3's index of open runs by thread served the count; version 5 replaced it by a counter.
      const open = await client.query(
        "SELECT indexdef FROM pg_indexes WHERE tablename = 'durable_runs' AND indexname = 'durable_runs_open'",
      );
      assert.equal(open.rows.length, 0);
    } finally {
      await client.end();
    }
  });

  it("version 4 gives a run paused before it its soonest approval expiry (ADR 0124)", async () => {
    const { url, client } = await legacyDatabase();
    try {
      await client.query(
        "INSERT INTO durable_runs VALUES ('thread-paused', 'run-p', 'orders', 'paused', '{}', 'ask', '{}', $1, NULL, 'o', 'then', 'then')",
        [pausedInterrupts],
      );
      const store = await createPostgresStore({ connectionString: url });
      try {
        assert.deepEqual(await store.findExpiringRuns(expiringQuery), [
          { threadId: "thread-paused", expiresAt: pausedExpiry },
        ]);
      } finally {
        await store.close();
      }
    } finally {
      await client.end();
    }
  });

  it("version 5 counts the runs open before it under their tenant's prefix (ADR 0127)", async () => {
    const { url, client } = await legacyDatabase();
    try {
      for (const [threadId, status] of openRunsBefore) {
        await client.query(
          "INSERT INTO durable_runs VALUES ($1, 'run', 'gate', $2, '{}', 'ask', '{}', '[]', NULL, 'o', 'then', 'then')",
          [threadId, status],
        );
      }
      const store = await createPostgresStore({ connectionString: url });
      try {
        await assertOpenCounts(store, 2);
      } finally {
        await store.close();
      }
    } finally {
      await client.end();
    }
  });

  it("refuses tables migrated by newer code", async () => {
    const { url, client } = await legacyDatabase();
    try {
      await (await createPostgresStore({ connectionString: url })).close();
      await client.query(
        "INSERT INTO tackle_migrations (store, version, name) VALUES ('durable', 99, 'future')",
      );
      await assert.rejects(createPostgresStore({ connectionString: url }), isTooNew);
      assert.equal((await pgCounts(client)).durable_runs, 2);
    } finally {
      await client.end();
    }
  });
});
