/**
 * Exactly once, as a property against an oracle: thousands of random programs (chains of nodes, a loop
 * back, journaled steps that fail and retry, tool calls, approvals, interrupts), each driven to its end
 * through a store that "dies" at a random operation — before the write lands, or after it landed but
 * before the driver heard — as a process killed there would: every later call of that driver hangs.
 * A fresh runner takes the run over (a bare `resume`), answers what is open, and so on until the run
 * ends. The oracle sees every write that landed and every side effect:
 *
 * - a step's function runs only once its `started` record for that attempt has landed;
 * - never again once its `done` record has landed, and at most once per attempt;
 * - every attempt carries the step's one idempotency key;
 * - the run ends with the state, and the tool cards a UI would show, of the same program run without a
 *   crash.
 *
 * `TACKLE_PROPERTY_ROUNDS` sets the number of programs (default 2,000 on the in-memory store, a quarter
 * of it on a SQLite file, an eighth on PostgreSQL); `TACKLE_PROPERTY_SEED` replays one.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { createMemoryStore, createRunner, type DurableStore } from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createSqliteStore } from "@tackle/durable/sqlite";
import { createTestDatabase, seededRandom } from "@tackle/test-support";
import {
  answerFor,
  cardStatuses,
  driveAlone,
  graphOf,
  Oracle,
  type Program,
  randomProgram,
  rounds,
  seeds,
} from "./property-programs.ts";

const never = new Promise<never>(() => {});

/**
 * The store as one process sees it, dying at its `dieAt`-th operation: before the operation reaches
 * the store (`before`), or after it landed (`after`); from then on every call (and every answer still
 * in flight) hangs, as in a killed process. What lands is reported to the oracle.
 */
function dyingStore(base: DurableStore, oracle: Oracle, dieAt: number, mode: "before" | "after") {
  let operations = 0;
  let dead = false;
  let died!: () => void;
  const death = new Promise<"died">((resolve) => {
    died = () => resolve("died");
  });
  const store = new Proxy(base, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function" || property === "close") return value;
      return (...args: unknown[]) => {
        if (dead) return never;
        operations += 1;
        const dying = operations === dieAt;
        if (dying && mode === "before") {
          dead = true;
          died();
          return never;
        }
        return (value as (...parameters: unknown[]) => Promise<unknown>)
          .apply(target, args)
          .then((result) => {
            oracle.storeCallLanded(String(property), args, result);
            if (dying) {
              dead = true;
              died();
            }
            return dead ? never : result;
          });
      };
    },
  });
  return { store, death };
}

/** Drives the program to its end through dying stores; the run's last snapshot and frames. */
async function driveWithCrashes(program: Program, base: DurableStore, seed: number, random: () => number) {
  const oracle = new Oracle();
  const threadId = `t-${seed}`;
  const graph = graphOf(program, `p-${seed}`, () => oracle);
  let deaths = 0;
  for (let incarnation = 0; incarnation < 60; incarnation += 1) {
    // A death at one of the next few operations, less likely as the run goes on, so every run ends.
    const dieAt =
      incarnation < 40 && random() < 0.8 ? 1 + Math.floor(random() * 12) : Number.MAX_SAFE_INTEGER;
    const { store, death } = dyingStore(base, oracle, dieAt, random() < 0.5 ? "before" : "after");
    // One driver's operations, one at a time: no sweep and no expiry look runs beside it (those would
    // have a call in flight when the process dies, which this harness does not model).
    const runner = createRunner({
      store,
      graphs: [graph],
      leaseMs: 0,
      recover: false,
      expiries: false,
      maxTakeovers: 1_000,
    });
    const drive = async () => {
      const run = await store.getRun(threadId);
      if (run === undefined) return runner.start(graph, { log: [], loops: 0 }, { threadId });
      if (run.status !== "paused") return runner.resume(threadId);
      const paused = await runner.get(threadId);
      if (paused === undefined) return assert.fail(`seed ${seed}: the paused run vanished`);
      const answers = Object.fromEntries(
        paused.interrupts.map((open) => [open.id, answerFor(open.id, open.request)]),
      );
      return runner.resume(threadId, answers);
    };
    const outcome = await Promise.race([drive(), death]);
    if (outcome === "died") {
      deaths += 1;
      continue;
    }
    if (outcome.status === "completed") {
      const frames = await base.readFrames(threadId, 0);
      await runner.close();
      return { snapshot: outcome, frames, oracle, deaths };
    }
    if (outcome.status !== "paused")
      assert.fail(`seed ${seed}: the run ended ${outcome.status}: ${JSON.stringify(outcome.error)}`);
    await runner.close();
  }
  return assert.fail(`seed ${seed}: the run did not end in 60 incarnations`);
}

async function checkProgram(
  seed: number,
  base: DurableStore,
  totals: { deaths: number; effects: number; reruns: number },
) {
  const random = seededRandom(seed);
  const program = randomProgram(random);
  const reference = await driveAlone(program, seed);
  const crashed = await driveWithCrashes(program, base, seed, random);
  assert.deepEqual(crashed.oracle.violations, [], `seed ${seed}: ${JSON.stringify(program)}`);
  assert.deepEqual(crashed.snapshot.state, reference.snapshot.state, `seed ${seed}: the end state differs`);
  assert.deepEqual(
    cardStatuses(crashed.frames),
    cardStatuses(reference.frames),
    `seed ${seed}: the tool cards differ`,
  );
  const keys = new Set(crashed.oracle.effects.map((effect) => effect.key));
  for (const key of keys) assert.ok(crashed.oracle.done.has(key), `seed ${seed}: ${key} never finished`);
  totals.deaths += crashed.deaths;
  totals.effects += crashed.oracle.effects.length;
  totals.reruns += crashed.oracle.effects.length - keys.size;
}

describe("exactly once through random crashes, against an oracle", () => {
  it("in-memory store: every program ends as without a crash, no step run past its record", async () => {
    const totals = { deaths: 0, effects: 0, reruns: 0 };
    const base = createMemoryStore();
    for (const seed of seeds(rounds(2_000), 1)) await checkProgram(seed, base, totals);
    // Most programs die several times on the way: a run of the property that crashed nothing proved nothing.
    if (process.env.TACKLE_PROPERTY_SEED === undefined) {
      assert.ok(totals.deaths > rounds(2_000) && totals.reruns > 0, `only ${JSON.stringify(totals)}`);
    }
    console.log(`# memory: ${JSON.stringify(totals)}`);
  });

  it("SQLite file: the same property on the store users have", async () => {
    const directory = mkdtempSync(join(tmpdir(), "durable-property-"));
    const base = createSqliteStore({ path: join(directory, "runs.sqlite"), synchronous: "normal" });
    const totals = { deaths: 0, effects: 0, reruns: 0 };
    try {
      for (const seed of seeds(Math.ceil(rounds(2_000) / 4), 100_000)) await checkProgram(seed, base, totals);
      console.log(`# sqlite: ${JSON.stringify(totals)}`);
    } finally {
      await base.close();
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it("PostgreSQL: the same property on the shared server", async () => {
    const database = await createTestDatabase("durable_property");
    const base = await createPostgresStore({ connectionString: database.url });
    const totals = { deaths: 0, effects: 0, reruns: 0 };
    try {
      for (const seed of seeds(Math.ceil(rounds(2_000) / 8), 200_000)) await checkProgram(seed, base, totals);
      console.log(`# postgres: ${JSON.stringify(totals)}`);
    } finally {
      await base.close();
      await database.drop();
    }
  });
});
