/**
 * A network that silently stops delivering (a half-open connection: no reset, no answer) under the
 * pool (ADR 0574), through a TCP relay that stalls: a query, a transaction and a migration answer a
 * typed, transient `query_timeout` within the pool's query deadline instead of waiting for ever; the
 * connection that timed out is destroyed, never handed to the next caller; a migration's lock wait is
 * not cut by the query deadline; the server ends a stalled client's idle transaction and frees its
 * locks; and the pool serves again once the network heals.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { isTransientDatabaseError, StorageError } from "@tackle/storage";
import {
  createPostgresPool,
  migratePostgres,
  type PostgresPoolOptions,
  postgresTransaction,
} from "@tackle/storage/postgres";
import {
  createTestDatabase,
  startTcpRelay,
  type TcpRelay,
  type TestDatabase,
  underLoadMs,
} from "@tackle/test-support";
import type pg from "pg";

let database: TestDatabase;
let direct: pg.Pool;
const cleanups: (() => Promise<void>)[] = [];

before(async () => {
  database = await createTestDatabase("tackle_storage_stall");
  direct = createPostgresPool({ connectionString: database.url, label: "stall-direct", max: 2 });
  await direct.query(
    "CREATE TABLE rows (id int PRIMARY KEY, n int NOT NULL); INSERT INTO rows VALUES (1, 0)",
  );
});

after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  await direct?.end().catch(() => undefined);
  await database?.drop().catch(() => undefined);
});

/** A relay and a pool through it (ended after the suite, once the relay is unstalled). */
async function relayedPool(
  options: Partial<PostgresPoolOptions> = {},
): Promise<{ relay: TcpRelay; pool: pg.Pool }> {
  const relay = await startTcpRelay(database.url);
  const pool = createPostgresPool({
    connectionString: relay.url,
    label: "stall-relayed",
    max: 1,
    onError: () => {},
    ...options,
  });
  cleanups.push(async () => {
    relay.unstall();
    await pool.end();
    await relay.close();
  });
  return { relay, pool };
}

/** `call`'s error, failing when it has not settled within `boundMs` (a wait with no deadline). */
async function failsWithin(boundMs: number, call: () => Promise<unknown>): Promise<unknown> {
  const outcome = call().then(
    () => ({ error: undefined as unknown, settled: true }),
    (error: unknown) => ({ error, settled: true }),
  );
  const first = await Promise.race([
    outcome,
    sleep(boundMs).then(() => ({ error: undefined, settled: false })),
  ]);
  assert.ok(first.settled, `no answer within ${boundMs} ms on a stalled network`);
  assert.notEqual(first.error, undefined, "expected an error");
  return first.error;
}

function assertQueryTimeout(error: unknown): void {
  assert.ok(StorageError.isInstance(error), `a StorageError, got ${String(error)}`);
  assert.equal(error.code, "query_timeout");
  assert.ok(isTransientDatabaseError(error));
}

describe("a query on a stalled network", () => {
  it("a pool query fails with query_timeout within the deadline; the pool serves after the stall", async () => {
    const { relay, pool } = await relayedPool({ queryTimeoutMs: 300 });
    await pool.query("SELECT 1");
    relay.stall();
    assertQueryTimeout(await failsWithin(underLoadMs(3_000), () => pool.query("SELECT 2")));
    relay.unstall();
    assert.deepEqual((await pool.query("SELECT 3 AS n")).rows, [{ n: 3 }]);
  });

  it("a checked-out connection whose query timed out is not handed to the next caller", async () => {
    const { relay, pool } = await relayedPool({ queryTimeoutMs: 300 });
    const client = await pool.connect();
    relay.stall();
    assertQueryTimeout(await failsWithin(underLoadMs(3_000), () => client.query("SELECT 1")));
    // Released as most code does, without an error: the pool must not keep it.
    client.release();
    relay.unstall();
    const answered = await Promise.race([pool.query("SELECT 4 AS n"), sleep(underLoadMs(3_000))]);
    assert.deepEqual(answered?.rows, [{ n: 4 }], "the next caller got the connection left waiting");
  });

  it("a postgresTransaction fails with query_timeout within the deadline and leaves no lock", async () => {
    const { relay, pool } = await relayedPool({ queryTimeoutMs: 300 });
    await pool.query("SELECT 1");
    const error = await failsWithin(underLoadMs(3_000), () =>
      postgresTransaction(pool, async (client) => {
        await client.query("SELECT n FROM rows WHERE id = 1 FOR UPDATE");
        relay.stall();
        await client.query("UPDATE rows SET n = n + 1 WHERE id = 1");
      }),
    );
    assertQueryTimeout(error);
    relay.unstall();
    await postgresTransaction(pool, async (client) => {
      await client.query("SELECT n FROM rows WHERE id = 1 FOR UPDATE");
    });
  });

  it("a connect on a stalled network fails within the connect deadline", async () => {
    const { relay, pool } = await relayedPool({ connectionTimeoutMs: 300 });
    relay.stall();
    const error = await failsWithin(underLoadMs(3_000), () => pool.query("SELECT 1"));
    assert.ok(isTransientDatabaseError(error), String(error));
    relay.unstall();
    await pool.query("SELECT 1");
  });
});

describe("a migration on a stalled network", () => {
  it("answers a transient StorageError within the deadline, and migrates after the stall", async () => {
    const { relay, pool } = await relayedPool({ queryTimeoutMs: 300 });
    await pool.query("SELECT 1");
    const migrations = [
      {
        version: 1,
        name: "stalled",
        up: async (client: pg.ClientBase) => {
          relay.stall();
          await client.query("CREATE TABLE stalled_v1 (id int)");
        },
      },
    ];
    const error = await failsWithin(underLoadMs(3_000), () =>
      migratePostgres(pool, { store: "stalled", migrations, lockTimeoutMs: 1_000 }),
    );
    assert.ok(StorageError.isInstance(error) && isTransientDatabaseError(error), String(error));
    relay.unstall();
    const healed = [{ version: 1, name: "stalled", up: "CREATE TABLE IF NOT EXISTS stalled_v1 (id int)" }];
    for (let tries = 0; ; tries++) {
      try {
        assert.equal((await migratePostgres(pool, { store: "stalled", migrations: healed })).to, 1);
        break;
      } catch (retry) {
        if (!isTransientDatabaseError(retry) || tries > 20) throw retry;
        await sleep(50);
      }
    }
  });

  it("waits for the migration lock up to lockTimeoutMs, past the pool's query deadline", async () => {
    const pool = createPostgresPool({
      connectionString: database.url,
      label: "stall-lock",
      max: 1,
      queryTimeoutMs: 200,
    });
    cleanups.push(() => pool.end());
    const holder = await direct.connect();
    try {
      await holder.query(
        "SELECT pg_advisory_lock(hashtext('tackle_migrations:' || coalesce(current_schema(), '')))",
      );
      const migrating = migratePostgres(pool, {
        store: "lock_wait",
        migrations: [{ version: 1, name: "one", up: "SELECT 1" }],
        lockTimeoutMs: underLoadMs(5_000),
      });
      await sleep(600);
      await holder.query("SELECT pg_advisory_unlock_all()");
      assert.deepEqual(await migrating, { from: 0, to: 1 });
    } finally {
      holder.release();
    }
  });

  it("gives a migration given as SQL its own query deadline (slow DDL)", async () => {
    const pool = createPostgresPool({
      connectionString: database.url,
      label: "stall-ddl",
      max: 1,
      queryTimeoutMs: 200,
    });
    cleanups.push(() => pool.end());
    const slow = [{ version: 1, name: "slow", up: "SELECT pg_sleep(0.5)" }];
    const error = await failsWithin(underLoadMs(3_000), () =>
      migratePostgres(pool, { store: "slow_a", migrations: slow }),
    );
    assert.ok(StorageError.isInstance(error), String(error));
    assert.deepEqual(
      await migratePostgres(pool, { store: "slow_b", migrations: slow, queryTimeoutMs: 5_000 }),
      {
        from: 0,
        to: 1,
      },
    );
  });
});

describe("the server frees what a stalled client held", () => {
  it("ends a session left idle in a transaction, releasing its row lock while the network is still stalled", async () => {
    const { relay, pool } = await relayedPool({ idleInTransactionTimeoutMs: 300 });
    const client = await pool.connect();
    await client.query("BEGIN");
    await client.query("SELECT n FROM rows WHERE id = 1 FOR UPDATE");
    relay.stall();
    const started = Date.now();
    const other = await direct.connect();
    try {
      await other.query("BEGIN");
      await other.query("SET LOCAL lock_timeout = '10s'");
      await other.query("SELECT n FROM rows WHERE id = 1 FOR UPDATE");
      await other.query("COMMIT");
    } finally {
      other.release();
    }
    assert.ok(Date.now() - started < underLoadMs(5_000));
    client.release(new Error("stalled"));
  });
});

describe("the deadline options", () => {
  for (const name of ["queryTimeoutMs", "idleInTransactionTimeoutMs", "keepAliveInitialDelayMs"] as const) {
    it(`refuses a bad ${name} with invalid_option`, () => {
      // 0 is "send nothing" for the idle-in-transaction limit (a pooler may refuse it), tested below.
      const bad =
        name === "idleInTransactionTimeoutMs"
          ? [-1, 1.5, Number.NaN, 2 ** 31]
          : [0, -1, 1.5, Number.NaN, 2 ** 31];
      for (const value of bad) {
        assert.throws(
          () => createPostgresPool({ connectionString: database.url, label: "bad", [name]: value }),
          (error: unknown) => StorageError.isInstance(error) && error.code === "invalid_option",
        );
      }
    });
  }

  it("sends the idle-in-transaction limit at startup, 60 s by default, and nothing when it is 0", async () => {
    const shown = async (options: Partial<PostgresPoolOptions>) => {
      const pool = createPostgresPool({ connectionString: database.url, label: "limit", ...options });
      try {
        return (await pool.query("SHOW idle_in_transaction_session_timeout")).rows[0]
          ?.idle_in_transaction_session_timeout;
      } finally {
        await pool.end();
      }
    };
    assert.equal(await shown({}), "1min");
    assert.equal(await shown({ idleInTransactionTimeoutMs: 0 }), "0");
  });

  it("takes a pool's deadlines from the environment where its caller gives none", async (t) => {
    const names = ["TACKLE_PG_QUERY_TIMEOUT_MS", "TACKLE_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS"] as const;
    const before = names.map((name) => process.env[name]);
    t.after(() => {
      for (const [at, name] of names.entries()) {
        if (before[at] === undefined) delete process.env[name];
        else process.env[name] = before[at];
      }
    });
    process.env.TACKLE_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS = "0";
    process.env.TACKLE_PG_QUERY_TIMEOUT_MS = "250";
    const pool = createPostgresPool({ connectionString: database.url, label: "env" });
    try {
      const shown = await pool.query("SHOW idle_in_transaction_session_timeout");
      assert.equal(shown.rows[0]?.idle_in_transaction_session_timeout, "0");
      await assert.rejects(
        pool.query("SELECT pg_sleep(5)"),
        (error: unknown) => StorageError.isInstance(error) && error.code === "query_timeout",
      );
    } finally {
      await pool.end();
    }
    // A caller's own value wins; a bad variable is refused naming it.
    process.env.TACKLE_PG_QUERY_TIMEOUT_MS = "soon";
    assert.throws(
      () => createPostgresPool({ connectionString: database.url, label: "env" }),
      (error: unknown) =>
        StorageError.isInstance(error) &&
        error.code === "invalid_option" &&
        /TACKLE_PG_QUERY_TIMEOUT_MS/.test(error.message),
    );
    await createPostgresPool({ connectionString: database.url, label: "env", queryTimeoutMs: 1_000 }).end();
  });

  it("refuses a bad migration queryTimeoutMs with invalid_option before taking a connection", async () => {
    await assert.rejects(
      migratePostgres(direct, { store: "bad", migrations: [], queryTimeoutMs: 0 }),
      (error: unknown) => StorageError.isInstance(error) && error.code === "invalid_option",
    );
  });
});
