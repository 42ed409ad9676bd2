/**
 * A push's wait for its document's advisory lock is bounded by `lockTimeoutMs`, not by the pool's query
 * deadline (`queryTimeoutMs`, ADR 0574): a lock another server holds for longer than that deadline, but
 * less than the lock timeout, is waited for and taken.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createPostgresPool } from "@tackle/storage/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import pg from "pg";
import { documentLocks } from "../src/server/postgres/postgres-document-locks.ts";

let database: TestDatabase;
before(async () => {
  database = await createTestDatabase("tackle_docscript_lock_wait");
});
after(async () => {
  await database?.drop();
});

it("waits for a document lock held past the pool's query deadline, within lockTimeoutMs", async () => {
  const pool = createPostgresPool({
    connectionString: database.url,
    label: "docscript",
    queryTimeoutMs: 300,
  });
  const other = new pg.Client({ connectionString: database.url });
  await other.connect();
  try {
    await other.query("SELECT pg_advisory_lock(hashtext('docscript:' || $1))", ["doc-1"]);
    const locks = documentLocks({ pool, locks: { pool }, lockTimeoutMs: 10_000 });
    const started = Date.now();
    const locking = locks.lockDocument("doc-1");
    await sleep(1_000);
    await other.query("SELECT pg_advisory_unlock(hashtext('docscript:' || $1))", ["doc-1"]);
    const unlock = await locking;
    assert.ok(Date.now() - started >= 1_000, "the lock was taken only once the other server let it go");
    await unlock();
  } finally {
    await other.end();
    await pool.end();
  }
});
