/**
 * The connection failing under `migratePostgres` and `postgresTransaction` at the worst moments, through
 * a TCP relay that loses a chosen statement's answer after the server did the work (ADRs 0572, 0573):
 * the answers are typed and transient, a lost migration COMMIT is not reported rolled back, and an
 * abort that lands while the COMMIT's answer is lost does not claim a rollback.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { isTransientDatabaseError, StorageError } from "@tackle/storage";
import {
  createPostgresPool,
  migratePostgres,
  type PostgresMigration,
  postgresTransaction,
} from "@tackle/storage/postgres";
import { createTestDatabase, startTcpRelay, type TcpRelay, type TestDatabase } from "@tackle/test-support";
import type pg from "pg";

let database: TestDatabase;
let relay: TcpRelay;
let direct: pg.Pool;
let relayed: pg.Pool;

before(async () => {
  database = await createTestDatabase("tackle_storage_lost");
  relay = await startTcpRelay(database.url);
  direct = createPostgresPool({ connectionString: database.url, label: "lost-direct", max: 2 });
  relayed = createPostgresPool({
    connectionString: relay.url,
    label: "lost-relayed",
    max: 2,
    onError: () => {},
  });
  await direct.query("CREATE TABLE applied (store text NOT NULL, version int NOT NULL)");
});

after(async () => {
  await relayed?.end().catch(() => undefined);
  await direct?.end().catch(() => undefined);
  await relay?.close();
  await database?.drop().catch(() => undefined);
});

function counted(store: string, versions: number): PostgresMigration[] {
  return Array.from({ length: versions }, (_, index) => ({
    version: index + 1,
    name: `${store}.${index + 1}`,
    up: `INSERT INTO applied VALUES ('${store}', ${index + 1})`,
  }));
}

async function thrown(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    return error;
  }
  assert.fail("expected an error");
}

function assertLost(error: unknown): asserts error is StorageError {
  assert.ok(StorageError.isInstance(error), `a StorageError, got ${String(error)}`);
  assert.equal(error.code, "connection_lost", error.message);
  assert.equal(isTransientDatabaseError(error), true);
}

async function appliedVersions(store: string): Promise<number[]> {
  const { rows } = await direct.query<{ version: number }>(
    "SELECT version FROM applied WHERE store = $1 ORDER BY version",
    [store],
  );
  return rows.map((row) => row.version);
}

describe("migratePostgres when the connection is lost", () => {
  it("a migration whose COMMIT answer is lost fails connection_lost, not rolled back; the retry finds it recorded", async () => {
    const migrations = counted("lost_commit", 2);
    // Migration 1's COMMIT goes through (the bookkeeping row with it) and its answer is lost.
    relay.loseAnswerTo(/COMMIT/);
    const error = await thrown(() => migratePostgres(relayed, { store: "lost_commit", migrations }));
    assertLost(error);
    assert.doesNotMatch(error.message, /rolled back/);
    assert.deepEqual(await appliedVersions("lost_commit"), [1]);
    assert.deepEqual(await migratePostgres(relayed, { store: "lost_commit", migrations }), {
      from: 1,
      to: 2,
    });
    assert.deepEqual(await appliedVersions("lost_commit"), [1, 2]);
  });

  it("a connection lost taking the lock, or refused, fails connection_lost, never the driver's raw error", async () => {
    const migrations = counted("lost_lock", 1);
    relay.loseAnswerTo(/pg_advisory_lock\(/);
    assertLost(await thrown(() => migratePostgres(relayed, { store: "lost_lock", migrations })));
    relay.down();
    try {
      assertLost(await thrown(() => migratePostgres(relayed, { store: "lost_lock", migrations })));
    } finally {
      relay.up();
    }
    assert.deepEqual(await migratePostgres(relayed, { store: "lost_lock", migrations }), { from: 0, to: 1 });
    const locks = await direct.query(
      `SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    );
    assert.equal(locks.rowCount, 0);
  });

  it("a lock timeout on PostgreSQL is transient, as on SQLite", async () => {
    const holder = await direct.connect();
    try {
      await holder.query(
        "SELECT pg_advisory_lock(hashtext('tackle_migrations:' || coalesce(current_schema(), '')))",
      );
      const error = await thrown(() =>
        migratePostgres(relayed, {
          store: "lost_wait",
          migrations: counted("lost_wait", 1),
          lockTimeoutMs: 50,
        }),
      );
      assert.ok(StorageError.isInstance(error) && error.code === "lock_timeout", String(error));
      assert.equal(isTransientDatabaseError(error), true);
    } finally {
      holder.release(new Error("held the migration lock"));
    }
  });
});

describe("postgresTransaction when the COMMIT's answer is lost", () => {
  it("an abort landing meanwhile is not answered aborted: the transaction committed", async () => {
    await direct.query("CREATE TABLE kept (id int PRIMARY KEY)");
    const controller = new AbortController();
    // The abort fires as the COMMIT goes out, and its answer is lost.
    relay.loseAnswerTo((text) => {
      if (!/COMMIT/.test(text)) return false;
      controller.abort(new Error("the caller gave up"));
      return true;
    });
    const error = await thrown(() =>
      postgresTransaction(
        relayed,
        async (client) => {
          await client.query("INSERT INTO kept VALUES (1)");
        },
        { signal: controller.signal },
      ),
    );
    assert.ok(!(StorageError.isInstance(error) && error.code === "aborted"), "not claimed rolled back");
    assert.equal(isTransientDatabaseError(error), true, String(error));
    assert.deepEqual((await direct.query("SELECT id FROM kept")).rows, [{ id: 1 }]);
  });
});
