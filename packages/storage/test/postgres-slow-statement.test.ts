/**
 * A statement slower than the pool's query deadline (ADR 0574), on a network that works: the caller is
 * told `query_timeout`, and the statement's session is ended on the server too. A closed socket alone
 * leaves the statement running until it answers, so a caller retrying a slow statement after its
 * deadline would pile up copies of it, each holding its locks.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { StorageError } from "@tackle/storage";
import { createPostgresPool } from "@tackle/storage/postgres";
import { createTestDatabase, type TestDatabase, underLoadMs } from "@tackle/test-support";

let database: TestDatabase;
before(async () => {
  database = await createTestDatabase("tackle_storage_slow_statement");
});
after(async () => {
  await database?.drop();
});

it("ends the session of a statement that outlived the query deadline", async () => {
  const pool = createPostgresPool({ connectionString: database.url, label: "slow", queryTimeoutMs: 300 });
  const watcher = createPostgresPool({ connectionString: database.url, label: "watcher", max: 1 });
  const sleeping = async () =>
    (
      await watcher.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'SELECT pg_sleep(30)%'",
      )
    ).rows[0]?.n;
  try {
    const error = await pool.query("SELECT pg_sleep(30)").then(
      () => assert.fail("a 30 s statement answered within a 300 ms deadline"),
      (thrown: unknown) => thrown,
    );
    assert.ok(StorageError.isInstance(error) && error.code === "query_timeout", String(error));
    const until = Date.now() + underLoadMs(5_000);
    while ((await sleeping()) !== 0 && Date.now() < until) await sleep(50);
    assert.equal(await sleeping(), 0, "the statement still runs on the server after its deadline");
  } finally {
    await pool.end();
    await watcher.end();
  }
});
