/**
 * Exactly once under concurrency, as a property against an oracle. Several live runners over one
 * store — as several server processes share one SQLite file or one PostgreSQL database — race on one
 * thread: an at-least-once queue delivers the same resume twice, a user double-clicks Approve while
 * another approver declines, two replicas both see a run as stale and take it over, a start with the
 * caller's run id is sent twice at once. Each round is a random program (`property-programs.ts`)
 * driven to its end by 2–4 runners through batches of operations sent at once (`racing-round.ts`):
 * the same start (thread and run id) two or three times; the answers to the open interrupts two or
 * three times, and in some batches different answers from another runner; bare resumes that take over
 * a driver frozen longer than the lease (a short `leaseMs`), some before the lease is out; reads. In
 * sweep rounds the frozen driver's run is taken over by the recovery sweeps of the others, whose looks
 * find it stale together. The oracle sees every write that landed and every side effect:
 *
 * - a step's function runs only once its `started` record for that attempt has landed, never after
 *   its `done` record, at most once per attempt; a tool call runs once, but for a frozen driver's step
 *   in flight when its run was taken over (no more re-runs than takeovers);
 * - the run ends with the state, and the tool cards a UI would show, of the same program driven alone
 *   with the answers that won;
 * - of conflicting answers exactly one set is stored, whole; every resume that carried it is answered
 *   with the run, every one that carried the other is told `answer_conflict` naming an interrupt that
 *   was answered otherwise (ADR 0119); a repeated start answers the one run of its id;
 * - no operation throws anything but a DurableError of a code it may be told; no runner logs a failure;
 *   every batch settles within its deadline (no deadlock).
 *
 * `TACKLE_PROPERTY_ROUNDS` sets the number of programs (default 120 on the in-memory store, half of it
 * on a SQLite file, a third on PostgreSQL, plus a sweep round for every 10 of them, at least 3);
 * `TACKLE_PROPERTY_SEED` replays one (timing still varies: the runners race for real), and
 * `TACKLE_PROPERTY_TRACE=1` prints its every store call and operation.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { createMemoryStore, type DurableStore } from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createSqliteStore } from "@tackle/durable/sqlite";
import { createTestDatabase } from "@tackle/test-support";
import { answerFor, cardStatuses, driveAlone, Oracle, rounds, seeds } from "./property-programs.ts";
import { emptyTotals, type Totals } from "./racing-outcomes.ts";
import { RacingRound, type RoundOptions } from "./racing-round.ts";

/** Drives one round to its end, then judges it against the program driven alone. */
async function raceProgram(
  seed: number,
  stores: readonly DurableStore[],
  base: DurableStore,
  totals: Totals,
  options: RoundOptions = {},
): Promise<void> {
  const round = new RacingRound(seed, stores, base, totals, options);
  const where = `seed ${seed}${options.sweep === true ? " (sweep round)" : ""}: ${JSON.stringify(round.program)}`;
  try {
    for (let phase = 0; round.violations.length === 0; phase += 1) {
      assert.ok(phase < 80, `${where}: the run did not end in 80 batches`);
      const snapshot = await round.read();
      if (snapshot === undefined) await round.start(round.runIds[0] as string);
      else if (snapshot.status === "paused") await round.resume(snapshot);
      else if (snapshot.status === "running") await round.recover();
      else if (snapshot.status === "completed") {
        const next = round.runIds[round.runIds.indexOf(snapshot.runId) + 1];
        if (next === undefined) break;
        await round.start(next);
      } else assert.fail(`${where}: the run ended ${snapshot.status}: ${JSON.stringify(snapshot.error)}`);
    }
    assert.deepEqual(round.violations, [], where);
    assert.deepEqual(round.oracle.violations, [], where);
    const reference = new Oracle();
    const alone = await driveAlone(round.program, seed, {
      answer: (id, request) => (round.winners.has(id) ? round.winners.get(id) : answerFor(id, request)),
      oracle: reference,
      runIds: round.runIds,
    });
    const final = await round.read();
    assert.deepEqual(final?.state, alone.snapshot.state, `${where}: the end state differs`);
    const frames = await base.readFrames(round.threadId, 0, 1_000_000);
    assert.deepEqual(cardStatuses(frames), cardStatuses(alone.frames), `${where}: the tool cards differ`);
    const runs = round.oracle.runsByKey();
    const referenceRuns = reference.runsByKey();
    assert.deepEqual([...runs.keys()].sort(), [...referenceRuns.keys()].sort(), `${where}: other steps ran`);
    for (const key of runs.keys()) assert.ok(round.oracle.done.has(key), `${where}: ${key} never finished`);
    const takeovers = frames.filter((frame) => frame.type === "run_recovered").length;
    let reruns = 0;
    for (const [key, count] of runs) reruns += Math.max(0, count - (referenceRuns.get(key) ?? 0));
    assert.ok(reruns <= takeovers, `${where}: ${reruns} re-runs with only ${takeovers} takeovers`);
    totals.rounds += 1;
    totals.takeovers += takeovers;
    totals.effects += round.oracle.effects.length;
    totals.reruns += reruns;
    totals.overtaken += round.oracle.overtaken;
  } finally {
    await round.close();
  }
}

/**
 * The rounds one after another; beside them the sweep rounds, twelve at a time side by side, since each
 * waits most of a second for the sweeps' first looks.
 */
async function property(
  name: string,
  stores: readonly DurableStore[],
  count: number,
  offset: number,
): Promise<Totals> {
  const totals = emptyTotals();
  const base = stores[0] as DurableStore;
  const sequential = async () => {
    for (const seed of seeds(count, offset)) await raceProgram(seed, stores, base, totals);
  };
  const sweepSeeds = seeds(Math.max(3, Math.ceil(count / 10)), offset + 50_000);
  const sweeps = async () => {
    for (let index = 0; index < sweepSeeds.length; index += 12) {
      const group = sweepSeeds.slice(index, index + 12);
      await Promise.all(group.map((seed) => raceProgram(seed, stores, base, totals, { sweep: true })));
    }
  };
  await Promise.all([sequential(), sweeps()]);
  console.log(`# ${name}: ${JSON.stringify(totals)}`);
  if (process.env.TACKLE_PROPERTY_SEED === undefined) {
    // A run of the property in which nothing raced proved nothing.
    const raced = [
      "startsRaced",
      "resumesRepeated",
      "conflictLosers",
      "conflictsWonBySecond",
      "freezes",
      "takeovers",
      "refusedActive",
      "fencedWrites",
      "sweepTakeovers",
      "sweepsRaced",
      "followUpRuns",
    ] as const;
    for (const key of raced) assert.ok(totals[key] > 0, `${name}: no ${key} in ${JSON.stringify(totals)}`);
  }
  return totals;
}

describe("concurrent drivers on one thread, against an oracle", () => {
  it("in-memory store: racing starts, resumes and takeovers end as the program driven alone", async () => {
    await property("memory", [createMemoryStore()], rounds(120), 1);
  });

  it("SQLite file: the same property, each runner with its own connection to the file", async () => {
    const directory = mkdtempSync(join(tmpdir(), "durable-concurrent-"));
    const path = join(directory, "runs.sqlite");
    const stores = Array.from({ length: 4 }, () => createSqliteStore({ path, synchronous: "normal" }));
    try {
      await property("sqlite", stores, Math.ceil(rounds(120) / 2), 100_000);
    } finally {
      for (const store of stores) await store.close();
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it("PostgreSQL: the same property, each runner with its own pool", async () => {
    const database = await createTestDatabase("durable_concurrent");
    const stores: DurableStore[] = [];
    try {
      for (let index = 0; index < 4; index += 1) {
        stores.push(await createPostgresStore({ connectionString: database.url, maxConnections: 3 }));
      }
      await property("postgres", stores, Math.ceil(rounds(120) / 3), 200_000);
    } finally {
      for (const store of stores) await store.close();
      await database.drop();
    }
  });
});
