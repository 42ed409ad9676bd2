/**
 * The oracle of `migrations-race.property.test.ts`: what the database must hold after a round (each
 * migration's effects exactly once for every version recorded, none beyond it) and what each process
 * may have answered, given its plan.
 */
import assert from "node:assert/strict";
import { underLoadMs } from "@tackle/test-support";
import type {
  Engine,
  ProcessPlan,
  RaceErrorReport,
  RoundPlan,
  RunOutcome,
} from "./migrations-race-support.ts";

/** What a round left: the recorded version, the migrations' log rows, their tables. */
export interface RaceState {
  readonly version: number;
  readonly log: readonly { readonly version: number; readonly worker: number }[];
  readonly tables: readonly number[];
}

/** What the rounds saw, printed at the end. */
export interface RaceTally {
  rounds: number;
  processes: number;
  ok: number;
  errors: Record<string, number>;
  kills: number;
  /** Kills that landed inside a migration's work: its effects were rolled back. */
  killsMidMigration: number;
  /** Rounds whose survivor had migrations left to apply after the race. */
  survivorsCompleted: number;
}

export function emptyTally(): RaceTally {
  return {
    rounds: 0,
    processes: 0,
    ok: 0,
    errors: {},
    kills: 0,
    killsMidMigration: 0,
    survivorsCompleted: 0,
  };
}

const range = (from: number, to: number) =>
  Array.from({ length: Math.max(0, to - from) }, (_, i) => from + i + 1);

/** Every recorded version's effects exactly once, in one piece, and nothing of a version not recorded. */
export function checkState(state: RaceState, plan: RoundPlan, where: string): void {
  const logged = state.log.map((row) => row.version).sort((a, b) => a - b);
  assert.deepEqual(
    logged,
    range(0, state.version),
    `${where}: each migration up to the recorded version once`,
  );
  assert.deepEqual(
    [...state.tables].sort((a, b) => a - b),
    range(0, state.version),
    `${where}: exactly the tables of the recorded migrations`,
  );
  assert.ok(state.version <= plan.migrations.length, `${where}: no version beyond the newest code's`);
  if (plan.throwsAt !== undefined)
    assert.ok(
      state.version < plan.throwsAt,
      `${where}: the failing migration ${plan.throwsAt} never committed`,
    );
}

function rowsOf(state: RaceState, pid: number): number[] {
  return state.log
    .filter((row) => row.worker === pid)
    .map((row) => row.version)
    .sort((a, b) => a - b);
}

/** The error codes a process may end with, by what its plan gave it. */
function checkError(
  engine: Engine,
  error: RaceErrorReport,
  plan: RoundPlan,
  process_: ProcessPlan,
  outcome: RunOutcome,
  state: RaceState,
  where: string,
): void {
  assert.ok(error.storage, `${where}: a StorageError, not ${error.name}: ${error.message}`);
  const mine = rowsOf(state, outcome.pid);
  const margin = underLoadMs(2000);
  switch (error.code) {
    case "schema_too_new":
      assert.equal(error.details.supported, process_.prefix, where);
      assert.ok((error.details.found ?? 0) > process_.prefix, `${where}: found ${error.details.found}`);
      assert.ok((error.details.found ?? 0) <= state.version, where);
      // PostgreSQL refuses before its first migration (under the lock). SQLite takes the write lock per
      // migration, so an older process may have applied its first ones before a newer one went past it.
      if (engine === "postgres") assert.deepEqual(mine, [], `${where}: a refused process changed nothing`);
      else
        assert.ok(
          mine.every((version) => version <= process_.prefix),
          `${where}: applied ${mine}`,
        );
      return;
    case "migration_failed":
      assert.ok(
        plan.throwsAt !== undefined && plan.throwsAt <= process_.prefix,
        `${where}: ${error.message}`,
      );
      assert.equal(error.details.found, plan.throwsAt - 1, where);
      assert.match(String(error.cause), /refuses|division by zero/, where);
      assert.ok(
        mine.every((version) => version < (plan.throwsAt as number)),
        where,
      );
      return;
    case "lock_timeout": {
      const wait = engine === "sqlite" ? process_.busyTimeoutMs : process_.lockTimeoutMs;
      assert.ok(wait !== undefined, `${where}: a lock timeout without a short wait: ${error.message}`);
      if (engine === "sqlite") assert.ok(error.transient, `${where}: a busy file is transient`);
      else assert.deepEqual(mine, [], `${where}: timed out waiting, so nothing migrated`);
      const own = plan.migrations.slice(0, process_.prefix).reduce((sum, m) => sum + m.slowMs, 0);
      const bound = (engine === "sqlite" ? (process_.prefix + 1) * wait : wait) + own + margin;
      assert.ok(outcome.elapsedMs < bound, `${where}: timed out after ${Math.round(outcome.elapsedMs)} ms`);
      return;
    }
    case "aborted":
      assert.ok(process_.abortAfterMs !== undefined, `${where}: aborted without an abort`);
      assert.deepEqual(mine, [], `${where}: aborted before it began, so nothing migrated`);
      assert.ok(outcome.elapsedMs < process_.abortAfterMs + margin, `${where}: aborted late`);
      return;
    default:
      assert.fail(`${where}: unexpected ${error.code}: ${error.message}`);
  }
}

/** One process's outcome against its plan and the state the round left. */
export function checkOutcome(
  engine: Engine,
  plan: RoundPlan,
  index: number,
  outcome: RunOutcome,
  state: RaceState,
  tally: RaceTally,
  label: string,
): void {
  const process_ = plan.processes[index] as ProcessPlan;
  const where = `${label}, process ${index} (prefix ${process_.prefix}, ${JSON.stringify(process_)})`;
  tally.processes += 1;
  assert.ok(!outcome.missedDeadline, `${where}: no answer within its deadline`);
  if (outcome.killed) {
    tally.kills += 1;
    const last = outcome.progress.at(-1);
    if (last !== undefined && !rowsOf(state, outcome.pid).includes(last)) tally.killsMidMigration += 1;
    return;
  }
  const reply = outcome.reply;
  assert.ok(reply !== undefined, `${where}: the process died: ${outcome.stderr}`);
  assert.ok(!("fatal" in reply), `${where}: ${"fatal" in reply ? reply.fatal : ""}`);
  if (reply.session !== undefined) {
    assert.equal(reply.session.advisoryLocks, 0, `${where}: the pooled session holds no migration lock`);
    assert.equal(reply.session.lockTimeout, "0", `${where}: the pooled session's lock_timeout is as it was`);
  }
  if ("error" in reply) {
    tally.errors[reply.error.code] = (tally.errors[reply.error.code] ?? 0) + 1;
    checkError(engine, reply.error, plan, process_, outcome, state, where);
    return;
  }
  tally.ok += 1;
  const { from, to } = reply.ok;
  assert.equal(to, process_.prefix, `${where}: migrated to its newest version`);
  assert.ok(from <= to && to <= state.version, `${where}: ${from}..${to}, recorded ${state.version}`);
  const mine = rowsOf(state, outcome.pid);
  // PostgreSQL holds its lock across all of them; SQLite takes the write lock per migration, so another
  // process may apply some between this one's.
  if (engine === "postgres")
    assert.deepEqual(mine, range(from, to), `${where}: applied ${from}..${to} itself`);
  else
    assert.ok(
      mine.every((version) => version > from && version <= to),
      `${where}: applied ${mine}`,
    );
}
