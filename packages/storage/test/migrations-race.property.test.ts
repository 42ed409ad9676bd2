/**
 * Migrations raced by real processes, as a property. Each round makes one random list of numbered
 * migrations (1–5 on SQLite, 1–4 on PostgreSQL), each of which logs a row naming its process and
 * creates a table (without IF NOT EXISTS, so a second application fails), some slow (the process
 * blocked holding SQLite's write lock, `pg_sleep` on PostgreSQL), and in a quarter of the rounds one
 * that fails after its effects. Two to four warm worker processes (`fixtures/race-worker.ts`) then open one fresh
 * SQLite file, or one fresh PostgreSQL schema, at the same moment, each with a random prefix of the list
 * (older code, some with none of it); some wait only a few ms (SQLite's busy timeout, PostgreSQL's lock
 * timeout), some abort their wait, and in some rounds one is SIGKILLed inside a migration's work or
 * while it waits. Then a survivor opens with every migration that can succeed.
 *
 * The oracle (`migrations-race-oracle.ts`): the log holds each version up to the recorded one exactly
 * once, with its table, and nothing of any later version (a failed or killed migration left nothing);
 * each process either migrated to its own newest version (applying on PostgreSQL exactly the versions
 * between what it found and that), or failed with a `StorageError` its plan allows: `schema_too_new`
 * naming a found version above its own and having changed nothing, `migration_failed` at the failing
 * version, `lock_timeout` only with a short wait (transient on SQLite) and within it, `aborted` only
 * with an abort, having migrated nothing; never a raw driver error, an unhandled rejection or a wait
 * past the round's deadline; a PostgreSQL pool's session is left holding no lock and its
 * `lock_timeout` as it was. The survivor completes the schema, and the oracle holds again after it.
 *
 * By default 300 SQLite rounds and 100 PostgreSQL rounds, the engines side by side and each in two
 * lanes of rounds at once; `TACKLE_PROPERTY_ROUNDS` sets the SQLite rounds (PostgreSQL runs a third of
 * them), from seed `TACKLE_PROPERTY_SEED` (default 565). The counts are printed.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, before, describe, it } from "node:test";
import { createPostgresPool } from "@tackle/storage/postgres";
import { createTestDatabase, seededRandom, type TestDatabase, underLoadMs } from "@tackle/test-support";
import type pg from "pg";
import {
  checkOutcome,
  checkState,
  emptyTally,
  type RaceState,
  type RaceTally,
} from "./migrations-race-oracle.ts";
import {
  type Engine,
  planRound,
  type RaceCommand,
  type RoundPlan,
  roundDeadlineMs,
  runRound,
  WorkerPool,
} from "./migrations-race-support.ts";

const roundsGiven = process.env.TACKLE_PROPERTY_ROUNDS;
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 565);
const sqliteRounds = roundsGiven === undefined ? 300 : Number(roundsGiven);
const postgresRounds = roundsGiven === undefined ? 100 : Math.ceil(Number(roundsGiven) / 3);

const directory = mkdtempSync(join(tmpdir(), "tackle-storage-race-"));
const workers = new WorkerPool(12);
let database: TestDatabase;
let admin: pg.Pool;

before(async () => {
  database = await createTestDatabase("tackle_storage_race");
  admin = createPostgresPool({ connectionString: database.url, label: "race-admin", max: 4 });
});

after(async () => {
  await workers.close();
  await admin?.end().catch(() => undefined);
  await database?.drop().catch(() => undefined);
  rmSync(directory, { recursive: true, force: true });
});

function readSqlite(path: string): RaceState {
  const file = new DatabaseSync(path);
  try {
    const version = Number(
      (file.prepare("PRAGMA user_version").get() as { user_version: number }).user_version,
    );
    const names = file
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'race_*'")
      .all()
      .map((row) => String(row.name));
    const log = names.includes("race_log")
      ? file
          .prepare("SELECT version, worker FROM race_log")
          .all()
          .map((row) => ({ version: Number(row.version), worker: Number(row.worker) }))
      : [];
    return { version, log, tables: tableVersions(names) };
  } finally {
    file.close();
  }
}

async function readPostgres(schema: string): Promise<RaceState> {
  const names = (
    await admin.query<{ name: string }>(
      "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1",
      [schema],
    )
  ).rows.map((row) => row.name);
  const version = names.includes("tackle_migrations")
    ? Number(
        (await admin.query(`SELECT max(version) AS v FROM ${schema}.tackle_migrations WHERE store = 'race'`))
          .rows[0].v ?? 0,
      )
    : 0;
  const log = names.includes("race_log")
    ? (
        await admin.query<{ version: number; worker: number }>(
          `SELECT version, worker FROM ${schema}.race_log`,
        )
      ).rows
    : [];
  return { version, log, tables: tableVersions(names) };
}

function tableVersions(names: readonly string[]): number[] {
  return names.flatMap((name) => {
    const match = /^race_t(\d+)$/.exec(name);
    return match === null ? [] : [Number(match[1])];
  });
}

/** The newest version a survivor can reach: the whole list, or up to the migration that fails. */
function reachable(plan: RoundPlan): number {
  return plan.throwsAt === undefined ? plan.migrations.length : plan.throwsAt - 1;
}

interface Target {
  readonly command: (
    process_: RoundPlan["processes"][number],
    migrations: RoundPlan["migrations"],
  ) => RaceCommand;
  readonly read: () => Promise<RaceState> | RaceState;
}

/** One round: the race, the oracle on it, then the survivor and the oracle again. */
async function playRound(engine: Engine, plan: RoundPlan, target: Target, tally: RaceTally, label: string) {
  const racing = await workers.take(plan.processes.length);
  const outcomes = await runRound(racing, plan, (process_) =>
    target.command(process_, plan.migrations.slice(0, process_.prefix)),
  );
  workers.giveBack(racing);
  const state = await target.read();
  checkState(state, plan, label);
  outcomes.forEach((outcome, index) => {
    checkOutcome(engine, plan, index, outcome, state, tally, label);
  });

  const newest = reachable(plan);
  const [survivor] = await workers.take(1);
  assert.ok(survivor !== undefined);
  const outcome = await survivor.run(
    target.command({ prefix: newest }, plan.migrations.slice(0, newest)),
    roundDeadlineMs(plan),
  );
  workers.giveBack([survivor]);
  assert.ok(
    outcome.reply !== undefined && "ok" in outcome.reply,
    `${label}: the survivor: ${JSON.stringify(outcome)}`,
  );
  assert.deepEqual(outcome.reply.ok, { from: state.version, to: newest }, `${label}: the survivor completes`);
  if (state.version < newest) tally.survivorsCompleted += 1;
  const final = await target.read();
  checkState(final, plan, `${label}, after the survivor`);
  assert.equal(final.version, newest, `${label}: the survivor's version is recorded`);
  tally.rounds += 1;
}

function report(engine: Engine, tally: RaceTally, started: number): void {
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.log(`# ${engine}: seed ${seed}, ${seconds} s: ${JSON.stringify(tally)}`);
}

/** Lanes of rounds run side by side: most of a round is waiting (for locks, slow migrations, processes). */
const lanes = 2;

/**
 * `rounds` rounds over `lanes` lanes, each lane its own random sequence (seed, lane): round `n` of a
 * lane replays from `TACKLE_PROPERTY_SEED` alone.
 */
async function playRounds(
  engine: Engine,
  rounds: number,
  round: (plan: RoundPlan, tally: RaceTally, label: string, name: string) => Promise<void>,
): Promise<void> {
  const tally = emptyTally();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      const random = seededRandom(seed + (engine === "sqlite" ? 0 : 1000) + lane);
      for (let index = lane; index < rounds; index += lanes) {
        const name = `${engine}_${lane}_${index}`;
        await round(
          planRound(random, engine),
          tally,
          `seed ${seed}, ${engine} lane ${lane} round ${index}`,
          name,
        );
      }
    }),
  );
  report(engine, tally, started);
  assert.equal(tally.rounds, rounds);
}

describe("migrations raced by real processes, against an oracle", { concurrency: true }, () => {
  it(`SQLite: ${sqliteRounds} rounds on one file each`, async () => {
    await playRounds("sqlite", sqliteRounds, async (plan, tally, label, name) => {
      const path = join(directory, `${name}.db`);
      const target: Target = {
        command: (process_, migrations) => ({
          engine: "sqlite",
          path,
          migrations,
          ...(process_.busyTimeoutMs === undefined ? {} : { busyTimeoutMs: process_.busyTimeoutMs }),
        }),
        read: () => readSqlite(path),
      };
      await playRound("sqlite", plan, target, tally, label);
      for (const suffix of ["", "-wal", "-shm"]) rmSync(`${path}${suffix}`, { force: true });
    });
  });

  it(`PostgreSQL: ${postgresRounds} rounds on one schema each`, async () => {
    const defaultLockTimeout = (await admin.query("SELECT current_setting('lock_timeout') AS t")).rows[0].t;
    assert.equal(defaultLockTimeout, "0", "the server's lock_timeout is off (the oracle compares with it)");
    await playRounds("postgres", postgresRounds, async (plan, tally, label, name) => {
      const schema = `race_${name}_${randomBytes(3).toString("hex")}`;
      await admin.query(`CREATE SCHEMA ${schema}`);
      const target: Target = {
        command: (process_, migrations) => ({
          engine: "postgres",
          url: database.url,
          schema,
          migrations,
          ...(process_.lockTimeoutMs === undefined ? {} : { lockTimeoutMs: process_.lockTimeoutMs }),
          ...(process_.abortAfterMs === undefined ? {} : { abortAfterMs: process_.abortAfterMs }),
        }),
        read: () => readPostgres(schema),
      };
      await playRound("postgres", plan, target, tally, label);
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
    });
  });
});

describe("a SQLite file another process holds in a long write transaction", () => {
  it("an open waits its busy timeout, then fails lock_timeout (transient), and the version is unchanged", async () => {
    const path = join(directory, "held.db");
    const [first, holder, opener] = await workers.take(3);
    assert.ok(first !== undefined && holder !== undefined && opener !== undefined);
    const migrations = [1, 2].map((version) => ({ version, slowMs: 0, throws: false }));
    const created = await first.run(
      { engine: "sqlite", path, migrations: migrations.slice(0, 1) },
      underLoadMs(5000),
    );
    assert.deepEqual(created.reply, { ok: { from: 0, to: 1 } });
    // Long enough that the opener's whole wait, process lag included, ends inside it.
    const holdMs = Math.min(underLoadMs(2000), 6000);
    let holding: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      holding = resolve;
    });
    const holderDone = holder.run({ engine: "sqlite-hold", path, holdMs }, underLoadMs(10_000), () =>
      holding(),
    );
    await held;
    const busyTimeoutMs = 300;
    const refused = await opener.run(
      { engine: "sqlite", path, migrations, busyTimeoutMs },
      underLoadMs(5000),
    );
    assert.ok(refused.reply !== undefined && "error" in refused.reply, JSON.stringify(refused));
    const { error } = refused.reply;
    assert.ok(error.storage, `a StorageError, not ${error.name}: ${error.message}`);
    assert.equal(error.code, "lock_timeout", error.message);
    assert.ok(error.transient, "isTransientDatabaseError says a retry can mend it");
    assert.ok(refused.elapsedMs >= busyTimeoutMs, `it waited ${Math.round(refused.elapsedMs)} ms`);
    assert.ok(
      refused.elapsedMs < holdMs,
      `it gave up before the holder ended (${Math.round(refused.elapsedMs)} ms)`,
    );
    assert.deepEqual((await holderDone).reply, { ok: { from: 0, to: 0 } });
    workers.giveBack([first, holder, opener]);
    assert.equal(readSqlite(path).version, 1, "the version is unchanged");
    const [again] = await workers.take(1);
    assert.ok(again !== undefined);
    const retried = await again.run({ engine: "sqlite", path, migrations }, underLoadMs(5000));
    workers.giveBack([again]);
    assert.deepEqual(retried.reply, { ok: { from: 1, to: 2 } }, "a retry once the file is free migrates");
  });
});
