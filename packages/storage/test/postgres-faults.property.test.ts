/**
 * The database failing under the storage layer at random moments, as a property on the real server
 * (ADRs 0572, 0573). Every pool reaches PostgreSQL through a TCP relay (`startTcpRelay`) that, every
 * 0–40 ms of each round's fault window, loses the answer to a random statement the pools send after the
 * server did the work (a `COMMIT` half the time — the migration's own too —, else a `BEGIN`, an
 * `INSERT`, an `UPDATE`, a `SELECT … FOR UPDATE`, the advisory lock and unlock, the migration's
 * `lock_timeout`, its bookkeeping …), loses the next answer of any connection, cuts every connection,
 * refuses every connection for 10–200 ms, or has the server terminate one of the pools' sessions.
 * Meanwhile two to four migrators (`migratePostgres` on one of three pools, some knowing only a prefix
 * of the round's 1–6 migrations, a quarter waiting only a few ms for the lock), two callers of
 * `postgresTransaction` (keyed, idempotent work; a tenth refusing after their writes) and two plain
 * queries sharing a pool of one connection with a 50 ms connect deadline (times the load) run, each
 * retrying what `isTransientDatabaseError` calls transient, as the README says callers do. A quarter
 * of the migration calls and of the transactions' first attempts carry a signal that aborts 0–20 ms
 * in, or earlier, as a COMMIT's answer is lost (the caller giving up at the worst moment).
 *
 * The oracle, whatever the faults: each migration applied exactly once (it records itself in a table
 * without a key, so a second application shows) and the schema at the latest version once a last
 * migrator ran after the relay healed (a migration whose COMMIT answer was lost is not run again);
 * each `migratePostgres` call applied what its answer says (each migration's transaction names the
 * call: success exactly its `from` + 1 to `to`, `connection_lost` during a migration the ones before it
 * and that one or not, any other answer none); each transaction's effect at most once, once for every one acknowledged, and none for one answered
 * `aborted` or refused; `migratePostgres` answers success or a `StorageError`: transient
 * (`connection_lost`, or `lock_timeout` with a short wait only: a generous wait timing out means a lock
 * outlived its dead holder), `aborted` only with a signal, `schema_too_new` only to older code; the
 * transactions and queries success or an error `isTransientDatabaseError` accepts; every call settles
 * within its deadline and every caller finishes within a bound after the relay heals; then every pool
 * answers within a bound, and PostgreSQL (asked directly, not through the relay) shows no pool over
 * its `max` and no advisory lock left.
 *
 * By default 30 rounds from seed 572; `TACKLE_PROPERTY_ROUNDS` and `TACKLE_PROPERTY_SEED` replace them.
 * The faults injected and the errors retried are printed; from 30 rounds on, every kind of transient
 * error a fault produces (`ECONNRESET`, "Connection terminated unexpectedly", `57P01` from a session
 * the server terminated, `55P03` behind `lock_timeout`, pg-pool's connect deadline) must have been met.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { isTransientDatabaseError } from "@tackle/storage";
import { createPostgresPool, migratePostgres } from "@tackle/storage/postgres";
import {
  createTestDatabase,
  seededRandom,
  startTcpRelay,
  type TcpRelay,
  type TestDatabase,
  underLoadMs,
} from "@tackle/test-support";
import type pg from "pg";
import {
  type CallerOptions,
  type CallLog,
  newCallLog,
  runMigrator,
  runQueries,
  runTransactions,
} from "./postgres-faults-callers.ts";
import {
  drainArmedLoss,
  type FaultTally,
  injectFaults,
  planRound,
  type RoundPlan,
} from "./postgres-faults-support.ts";

const rounds = Number(process.env.TACKLE_PROPERTY_ROUNDS ?? 30);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 572);
const poolMax = 2;
const connectTimeoutMs = 2_000;
/** The pools' query deadline (times the load, read at the start); a stall past it times queries out. */
let queryTimeoutMs = 400;

let database: TestDatabase;
let relay: TcpRelay;
/** Straight to the server, for setup and the oracle's reads. */
let admin: pg.Pool;
/**
 * Through the relay, each named: three migrator pools, one for the transactions, and one of a single
 * connection with a 50 ms connect deadline (times the load, read at the start) for the plain queries.
 */
const pools: { name: string; pool: pg.Pool; max: number }[] = [];
let idleLosses = 0;
/** The query pool's connect deadline: short, so waiting for its one connection times out. */
let queryConnectMs = 50;

before(async () => {
  database = await createTestDatabase("tackle_storage_faults");
  relay = await startTcpRelay(database.url);
  admin = createPostgresPool({
    connectionString: database.url,
    label: "faults-admin",
    max: 2,
    onError: () => {},
  });
  await admin.query(`CREATE TABLE fault_applied (store text NOT NULL, version int NOT NULL, attempt text);
    CREATE TABLE fault_ops (id text PRIMARY KEY);
    CREATE TABLE fault_effects (op text NOT NULL);
    CREATE TABLE fault_counter (id int PRIMARY KEY, n int NOT NULL);
    INSERT INTO fault_counter VALUES (1, 0)`);
  queryConnectMs = underLoadMs(50);
  queryTimeoutMs = underLoadMs(400);
  for (const name of ["faults_m0", "faults_m1", "faults_m2", "faults_work", "faults_queries"]) {
    const queries = name === "faults_queries";
    const max = queries ? 1 : poolMax;
    const pool = createPostgresPool({
      connectionString: `${relay.url}?application_name=${name}`,
      label: name,
      max,
      connectionTimeoutMs: queries ? queryConnectMs : connectTimeoutMs,
      queryTimeoutMs,
      onError: () => {
        idleLosses += 1;
      },
    });
    pools.push({ name, pool, max });
  }
});

after(async () => {
  for (const { pool } of pools) await pool.end().catch(() => undefined);
  await relay?.close();
  await admin?.end().catch(() => undefined);
  await database?.drop().catch(() => undefined);
});

/** Runs the round's callers while faults are injected, then heals the relay; resolves when all are done. */
async function runRound(plan: RoundPlan, round: number, faults: FaultTally): Promise<CallLog> {
  const queries = pools[4]!.pool;
  const log = newCallLog();
  const lockTimeoutMs = underLoadMs(4_000);
  let giveUpAt = Number.POSITIVE_INFINITY;
  const options: CallerOptions = {
    log,
    // A migrator's worst: the connect, the lock wait and the query deadline on top (ADR 0574), with room.
    callDeadlineMs: connectTimeoutMs + lockTimeoutMs + queryTimeoutMs + underLoadMs(4_000),
    giveUpAt: () => giveUpAt,
    random: seededRandom(seed * 1_000_003 + round * 2 + 1),
    giveUps: new Set(),
    inFlight: new Set(),
  };
  // A stall past the deadline lasts until every transaction and query that began before it must have
  // answered while still stalled: a query's deadline, then a new connection's connect deadline (ADR
  // 0574). A migrator's lock wait has lockTimeoutMs on top, so migrators are not held to it.
  const stalledBoundMs = queryTimeoutMs + connectTimeoutMs + underLoadMs(300);
  const stalls = {
    pastMs: stalledBoundMs,
    atEnd: (stalledAt: number) => {
      for (const call of options.inFlight)
        if (call.started <= stalledAt && !call.what.startsWith("migrator"))
          log.violations.push(`${call.what}: no answer ${stalledBoundMs} ms into a stall`);
    },
  };
  // As a COMMIT's answer is lost, a pending abort fires (half the time): the caller gives up at the
  // worst moment, which may be this very transaction's.
  const faultRandom = seededRandom(seed * 1_000_003 + round * 2);
  const onCommitLost = () => {
    const pending = [...options.giveUps];
    if (pending.length > 0 && faultRandom() < 0.5) pending[Math.floor(faultRandom() * pending.length)]!();
  };
  const work = pools[3]!.pool;
  const callers = [
    ...plan.migrators.map((migrator, index) =>
      runMigrator(pools[migrator.pool]!.pool, plan, index, { ...options, lockTimeoutMs }),
    ),
    runTransactions(work, plan, 0, options),
    runTransactions(work, plan, 1, options),
    runQueries(queries, queryConnectMs * 1.2, options),
    runQueries(queries, queryConnectMs * 1.2, options),
  ];
  const injecting = injectFaults(relay, admin, faultRandom, faults, onCommitLost, stalls);
  await Promise.race([sleep(plan.faultMs), Promise.all(callers)]);
  await injecting.stop();
  await drainArmedLoss(relay);
  const healBoundMs = options.callDeadlineMs + underLoadMs(5_000);
  giveUpAt = Date.now() + healBoundMs;
  const started = Date.now();
  await Promise.all(callers);
  if (Date.now() - started > healBoundMs + options.callDeadlineMs)
    log.violations.push(`the callers took ${Date.now() - started} ms to finish after the relay healed`);
  return log;
}

/** Migration bookkeeping and effects after a round: each version once, the schema at the latest. */
/**
 * `call`'s answer once the relay healed: a transient error (a pooled connection whose loss the pool has
 * not read yet) is tried again until `deadline`; any other error fails the round.
 */
async function served<T>(what: string, deadline: number, call: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await call();
    } catch (error) {
      if (!isTransientDatabaseError(error) || Date.now() > deadline)
        assert.fail(`${what} after the relay healed: ${String(error)}`);
      await sleep(10);
    }
  }
}

async function checkMigrations(plan: RoundPlan): Promise<void> {
  const latest = plan.migrations.length;
  const migrations = plan.migrations;
  const lockTimeoutMs = underLoadMs(4_000);
  const result = await served("the last migrator", Date.now() + underLoadMs(5_000), () =>
    migratePostgres(pools[0]!.pool, { store: plan.store, migrations, lockTimeoutMs }),
  );
  assert.equal(result.to, latest);
  const applied = await admin.query<{ version: number; times: string }>(
    "SELECT version, count(*) AS times FROM fault_applied WHERE store = $1 GROUP BY version ORDER BY version",
    [plan.store],
  );
  const recorded = await admin.query<{ version: number }>(
    "SELECT version FROM tackle_migrations WHERE store = $1 ORDER BY version",
    [plan.store],
  );
  const expected = Array.from({ length: latest }, (_, index) => index + 1);
  assert.deepEqual(
    applied.rows.map((row) => [row.version, Number(row.times)]),
    expected.map((version) => [version, 1]),
    `${plan.store}: every migration applied exactly once`,
  );
  assert.deepEqual(
    recorded.rows.map((row) => row.version),
    expected,
  );
}

/**
 * Each `migratePostgres` call applied what its answer says: `ok` exactly the versions from `from` + 1
 * to `to`; `connection_lost` during a migration the ones before it, and that one or not (its COMMIT's
 * answer may be what was lost); anything else (lost before a migration, `aborted`, `lock_timeout`,
 * `schema_too_new`) none.
 */
async function checkAttempts(plan: RoundPlan, log: CallLog): Promise<number> {
  const { rows } = await admin.query<{ attempt: string; versions: number[] }>(
    `SELECT attempt, array_agg(version ORDER BY version) AS versions FROM fault_applied
      WHERE store = $1 AND attempt IS NOT NULL GROUP BY attempt`,
    [plan.store],
  );
  const appliedBy = new Map(rows.map((row) => [row.attempt, row.versions]));
  assert.ok(
    rows.every((row) => log.migrations.some((call) => call.attempt === row.attempt)),
    "every migration applied by a call that answered",
  );
  for (const call of log.migrations) {
    const applied = appliedBy.get(call.attempt) ?? [];
    const first = applied[0] ?? 0;
    const contiguous = applied.every((version, index) => version === first + index);
    const last = applied.at(-1);
    const fits =
      call.answer === "ok"
        ? applied.length === (call.to ?? 0) - (call.from ?? 0) && (last ?? call.to) === call.to
        : call.answer === "connection_lost" && call.found !== undefined
          ? contiguous && (last === undefined || last === call.found || last === call.found + 1)
          : applied.length === 0;
    assert.ok(
      fits && contiguous,
      `${call.attempt} answered ${JSON.stringify(call)} and applied ${JSON.stringify(applied)}`,
    );
  }
  return rows.length;
}

/** Transactions: each effect at most once, every acknowledged one present, the counter agreeing. */
async function checkTransactions(plan: RoundPlan, log: CallLog): Promise<void> {
  const effects = await admin.query<{ op: string; times: string }>(
    "SELECT op, count(*) AS times FROM fault_effects WHERE op LIKE $1 GROUP BY op",
    [`${plan.store}:%`],
  );
  const twice = effects.rows.filter((row) => Number(row.times) !== 1);
  assert.deepEqual(twice, [], `${plan.store}: a transaction's effect applied twice`);
  const present = new Set(effects.rows.map((row) => row.op));
  const lost = log.acknowledged.filter((id) => !present.has(id));
  assert.deepEqual(lost, [], `${plan.store}: acknowledged transactions lost`);
  const kept = log.aborted.filter((id) => present.has(id));
  assert.deepEqual(kept, [], `${plan.store}: transactions answered aborted ("rolled back") committed`);
  const totals = await admin.query<{ n: number; ops: string; effects: string }>(
    `SELECT (SELECT n FROM fault_counter WHERE id = 1) AS n, (SELECT count(*) FROM fault_ops) AS ops,
      (SELECT count(*) FROM fault_effects) AS effects`,
  );
  const { n, ops, effects: effectCount } = totals.rows[0]!;
  assert.deepEqual(
    [n, Number(ops)],
    [Number(effectCount), Number(effectCount)],
    "counter, ids and effects agree",
  );
}

/** Within a bound after the heal: every pool answers, none over its max, no advisory lock left. */
async function checkHealed(): Promise<void> {
  const deadline = Date.now() + underLoadMs(5_000);
  for (const { name, pool } of pools) await served(`${name} serving`, deadline, () => pool.query("SELECT 1"));
  const maxOf = new Map(pools.map(({ name, max }) => [name, max]));
  const within = (row: { application_name: string; sessions: string }) =>
    Number(row.sessions) <= (maxOf.get(row.application_name) ?? 0);
  let state: { application_name: string; sessions: string }[] = [];
  let locks = 0;
  for (;;) {
    state = (
      await admin.query(
        `SELECT application_name, count(*) AS sessions FROM pg_stat_activity
          WHERE datname = current_database() AND application_name LIKE 'faults\\_%' GROUP BY application_name`,
      )
    ).rows;
    locks = Number(
      (
        await admin.query(
          `SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory'
            AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        )
      ).rows[0].n,
    );
    if ((locks === 0 && state.every(within)) || Date.now() > deadline) break;
    await sleep(20);
  }
  for (const row of state)
    assert.ok(within(row), `${row.application_name} holds ${row.sessions} sessions, over its max`);
  assert.equal(locks, 0, "an advisory lock outlived every migrator and transaction");
}

it(`PostgreSQL behind a failing network: ${rounds} rounds of migrators, transactions and queries against an oracle`, async () => {
  const faults: FaultTally = {};
  const retried: FaultTally = {};
  const seen: FaultTally = {};
  let applyingCalls = 0;
  const started = Date.now();
  for (let round = 1; round <= rounds; round++) {
    // Each round's plan from its own generator, so a seed replays every round's plan (the faults'
    // moments and the callers' draws have generators of their own, and the interleaving varies).
    const plan = planRound(round, seededRandom(seed * 1_000_003 - round), 3);
    const log = await runRound(plan, round, faults);
    const context = `round ${round} (seed ${seed}): ${JSON.stringify(plan.migrators)}`;
    assert.deepEqual(log.violations, [], context);
    applyingCalls += await checkAttempts(plan, log);
    await checkMigrations(plan);
    await checkTransactions(plan, log);
    await checkHealed();
    for (const [kind, times] of Object.entries(log.retried)) retried[kind] = (retried[kind] ?? 0) + times;
    for (const [kind, times] of Object.entries(log.seen)) seen[kind] = (seen[kind] ?? 0) + times;
  }
  // The errors a fault can produce were all met, and all retried as transient: a reset, a connection
  // ended under a query, a session the server terminated, a pool's connect deadline, a lock wait.
  if (rounds >= 30) {
    const expected = [
      "ECONNRESET",
      "Connection terminated unexpectedly",
      "57P01",
      "55P03",
      "Query read timeout",
    ];
    assert.deepEqual(
      expected.filter((signature) => seen[signature] === undefined),
      [],
      `every kind of fault met; met ${JSON.stringify(seen)}`,
    );
    assert.ok(
      Object.keys(seen).some((signature) => signature.startsWith("timeout exceeded when trying to connect")),
    );
  }
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  console.log(
    `# seed ${seed}, ${rounds} rounds, ${seconds} s, ${relay.resets} answers lost, ${idleLosses} idle losses, ${applyingCalls} migration calls that applied some; faults ${JSON.stringify(faults)}; answers ${JSON.stringify(retried)}; transient errors ${JSON.stringify(seen)}`,
  );
});
