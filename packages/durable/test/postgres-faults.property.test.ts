/**
 * The database fails under the runners at random moments, as a property against an oracle on real
 * PostgreSQL. Two runners (two pools, as two processes) reach the database through a TCP relay
 * (`startTcpRelay`) that, while a random program (`property-programs.ts`) is driven, loses the answer
 * to a random statement the store sends (a transaction's COMMIT, a fenced commit, a journal or frame
 * write, a claim's `FOR UPDATE`, a read: the server did the work, the runner hears a reset), cuts
 * every connection, or refuses connections for a short outage. A client does what the README tells a
 * user to: it reads the run and starts it (with its `runId`, so a repeat starts nothing), answers what
 * is open (a resume with answers is safe to send again), or sends a bare `resume` to take over a run
 * left `running` once its lease is out — and the runners' recovery sweeps do the same by themselves.
 * Then the relay heals. The oracle sees every write that landed (read straight from the database when
 * the runner's call failed) and every side effect:
 *
 * - a step's function runs only once its `started` record for that attempt has landed, never after
 *   its `done` record (but for a driver whose run was taken over, once per takeover), at most once per
 *   attempt;
 * - every call settles within a deadline with the run or a typed `DurableError` (`run_active`, or
 *   `unavailable` while the database fails), never an untyped driver error, never a hang;
 * - within a bound after the relay heals the run completes, with the state and the tool cards of the
 *   same program run without faults, and its frames' seqs are 1, 2, 3… with none missing.
 *
 * In a program in four the database is sound but one runner is cut off alone (`partitioner`) while it
 * runs a slow tool, long enough for the other to take the run over: its step may run once more per
 * takeover (`checkEnd`), and no write of it may land once the other's claim did.
 *
 * `TACKLE_PROPERTY_ROUNDS` sets the number of programs (default 25); `TACKLE_PROPERTY_SEED` replays
 * one (the faults' timing still varies: the network fails for real).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import {
  type CommitBatch,
  createRunner,
  DurableError,
  type DurableStore,
  type Runner,
} from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import {
  createTestDatabase,
  seededRandom,
  startTcpRelay,
  type TcpRelay,
  type TestDatabase,
  underLoadMs,
} from "@tackle/test-support";
import { type Client, checkEnd, emptyTotals, move, type Totals } from "./faults-client.ts";
import {
  checkServing,
  emptyFaults,
  type FaultCounts,
  observedStore,
  settle,
  startFaults,
} from "./postgres-faults.ts";
import { driveAlone, graphOf, Oracle, randomProgram, rounds, seeds } from "./property-programs.ts";

/** The runners' lease: short, so a run left `running` by a failed driver is taken over within the round. */
const leaseMs = 150;

let database: TestDatabase;
let relay: TcpRelay;
let direct: DurableStore;
let stores: DurableStore[] = [];
/** Each runner's own way to the shared relay: down, it cuts that runner off alone (a partition). */
let links: TcpRelay[] = [];
before(async () => {
  database = await createTestDatabase("durable_faults");
  direct = await createPostgresStore({ connectionString: database.url });
  relay = await startTcpRelay(database.url);
  for (let index = 0; index < 2; index += 1) {
    links.push(await startTcpRelay(relay.url));
    stores.push(
      await createPostgresStore({ connectionString: links[index]?.url as string, onError: () => {} }),
    );
  }
});
after(async () => {
  for (const store of stores) await store.close();
  stores = [];
  for (const link of links) await link.close();
  links = [];
  await direct?.close();
  await relay?.close();
  await database?.drop();
});

/**
 * A driver cut off from the database while it runs a slow tool, long enough for the lease to lapse: its
 * heartbeats fail, the other runner (a sweep, a client's bare resume) takes the run over and runs the
 * step again, and the first driver's effect and later writes come after. Now and then, as a step's
 * effect is about to run, the runner whose `started` record last landed is cut off for 2–4 leases while
 * the tool takes 1–4 leases. The oracle allows that driver's effect once per takeover (`checkEnd`), and
 * no write of an owner a later claim replaced may land (here, and the end state and the seqs).
 */
function partitioner(
  random: () => number,
  faulty: () => boolean,
  totals: Totals<FaultCounts>,
  takeOver: (from: number) => Promise<unknown>,
  violations: string[],
) {
  let lastStarter: number | undefined;
  /** The owner of the run's last claim (or its creation) whose answer was heard. */
  let owner: string | undefined;
  const cutOff = new Set<Promise<unknown>>();
  return {
    /** `store` of runner `index`, telling whose `started` record landed last, and which owner writes. */
    watch(store: DurableStore, index: number): DurableStore {
      return new Proxy(store, {
        get(target, property, receiver) {
          const value = Reflect.get(target, property, receiver);
          if (property === "createRun")
            return async (...args: Parameters<DurableStore["createRun"]>) => {
              await target.createRun(...args);
              owner = args[0].owner;
            };
          if (property === "claimRun")
            return async (...args: Parameters<DurableStore["claimRun"]>) => {
              const claimed = await target.claimRun(...args);
              if (claimed !== undefined) owner = args[1];
              return claimed;
            };
          if (property !== "commit") return value;
          return async (threadId: string, writer: string, batch: CommitBatch) => {
            await target.commit(threadId, writer, batch);
            if (writer !== owner)
              violations.push(`a write of ${writer} landed after ${owner} claimed the run`);
            if (batch.journal?.some((record) => record.state === "started")) lastStarter = index;
          };
        },
      });
    },
    async beforeEffect(): Promise<void> {
      const index = lastStarter;
      const link = index === undefined ? undefined : links[index];
      if (!faulty() || index === undefined || link === undefined || random() >= 0.5) return;
      totals.faults.partitions += 1;
      link.down();
      cutOff.add(sleep(leaseMs * (2 + random() * 3)).then(() => link.up()));
      // Another user, or the other runner's sweep, sends a bare resume once the lease is out.
      cutOff.add(sleep(leaseMs * 1.5).then(() => takeOver(index)));
      await sleep(leaseMs * (2 + random() * 2));
    },
    /** Every runner connected again, every takeover answered. */
    async healed(): Promise<void> {
      for (let size = -1; size !== cutOff.size; ) {
        size = cutOff.size;
        await Promise.all(cutOff);
      }
      for (const link of links) link.up();
    },
  };
}

async function checkProgram(seed: number, totals: Totals<FaultCounts>): Promise<void> {
  const random = seededRandom(seed);
  const program = randomProgram(random);
  const threadId = `t-${seed}`;
  // Now and then the thread's next run too: its start reopens the thread through a claim.
  const runIds = random() < 0.3 ? [`run-${seed}-a`, `run-${seed}-b`] : [`run-${seed}`];
  const where = `seed ${seed}: ${JSON.stringify(program)} as ${runIds.join(", ")}`;
  const reference = await driveAlone(program, seed, { runIds });
  const oracle = new Oracle({ takenOver: true });
  const latencies = seededRandom(seed * 17 + 3);
  let faulty = true;
  const violations: string[] = [];
  let runners: Runner[] = [];
  // The other runner's bare resume, sent again (as a user would) while the database fails under it.
  const takeOver = async (from: number) => {
    const what = `runner ${1 - from}'s takeover`;
    for (let tries = 0; tries < 8; tries += 1) {
      const call = () => (runners[1 - from] as Runner).resume(threadId);
      const outcome = await settle(call, underLoadMs(15_000), what, violations);
      if (outcome.ok || !DurableError.isInstance(outcome.error)) return outcome;
      await sleep(leaseMs / 3);
    }
  };
  // A program in four is partitioned instead: the database sound, a runner cut off alone in a slow tool.
  const partitionRandom = seededRandom(seed * 13 + 5);
  const partitioned = partitionRandom() < 0.25;
  const partitions = partitioner(partitionRandom, () => faulty && partitioned, totals, takeOver, violations);
  const graph = graphOf(program, `p-${seed}`, () => oracle, partitions.beforeEffect);
  // Some store calls wait a little first, so drives last long enough for heartbeats and faults between.
  const latency = () => (latencies() < 0.2 ? Math.floor(latencies() * 100) : 0);
  runners = stores.map((store, index) =>
    createRunner({
      store: observedStore(
        partitions.watch(store, index),
        direct,
        () => oracle,
        latency,
        (method) => {
          // While faults are on, now and then the connections drop as a call goes out (a commit more often):
          // it fails without landing, and the driver's next write is the test.
          if (faulty && !partitioned && latencies() < (method === "commit" ? 0.15 : 0.05)) {
            relay.cut();
            totals.faults.cuts += 1;
          }
        },
      ),
      graphs: [graph],
      leaseMs,
      recover: { everyMs: 1000 },
      maxTakeovers: 1_000,
    }),
  );
  const pick = () => runners[Math.floor(random() * runners.length)] as Runner;
  const client: Client = { graph, threadId, runIds, random, violations, totals };
  try {
    // Faults for a random window while the client drives; the run may end inside it.
    const faults = partitioned
      ? { stop: async () => {} }
      : startFaults(relay, seededRandom(seed * 31 + 7), totals.faults, 200);
    const faultsUntil = Date.now() + 300 + Math.floor(random() * 2000);
    let completed = false;
    while (!completed && Date.now() < faultsUntil && violations.length === 0) {
      completed = await move(pick(), client);
    }
    faulty = false;
    await faults.stop();
    await partitions.healed();
    // Healed: the run completes within a bound (a lease, a sweep's look, the client's moves).
    const healed = Date.now();
    const bound = underLoadMs(10_000);
    while (!completed && violations.length === 0) {
      if (Date.now() - healed > bound)
        violations.push(`the run did not complete ${bound} ms after the relay healed`);
      else completed = await move(pick(), client);
    }
    totals.healMs.push(Date.now() - healed);
    await checkServing(stores, database.url, underLoadMs(5_000), violations);
  } finally {
    for (const runner of runners) await runner.close();
  }
  assert.deepEqual(violations, [], where);
  assert.deepEqual(oracle.violations, [], where);
  await checkEnd(where, direct, threadId, oracle, reference, totals);
}

describe("PostgreSQL failing under the runners at random moments, against an oracle", () => {
  it("every call settles typed, nothing runs twice or is lost, and the run completes once healed", {
    timeout: 600_000,
  }, async () => {
    const totals = emptyTotals(emptyFaults());
    for (const seed of seeds(rounds(25), 300_000)) await checkProgram(seed, totals);
    const heal = [...totals.healMs].sort((a, b) => a - b);
    console.log(
      `# postgres faults: ${JSON.stringify({ ...totals, healMs: { median: heal[heal.length >> 1], max: heal.at(-1) } })}`,
    );
    // A run of the property that lost no answer proved nothing.
    if (process.env.TACKLE_PROPERTY_SEED === undefined)
      assert.ok(relay.resets > rounds(25), `only ${relay.resets} answers lost`);
    if (process.env.TACKLE_PROPERTY_SEED === undefined)
      assert.ok(totals.overtaken > 0, "no driver cut off in a slow tool ran it after a takeover");
  });
});
