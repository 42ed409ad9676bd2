/**
 * Another process holds the SQLite file's write lock at random moments, as a property against an
 * oracle on a real file. Two runners (two connections, as two server processes sharing the file; their
 * busy timeout short) drive a random program (`property-programs.ts`) while a third connection, in a
 * process of its own (`sqlite-locker-child.ts`), takes the write lock (`BEGIN IMMEDIATE`) for random
 * periods, a third of them past the busy timeout: a store's write then fails `lock_timeout` having
 * written nothing. A client does what the README tells a user to (`faults-client.ts`), the runners'
 * recovery sweeps take over runs left `running`. Then the locker stops. The oracle (the one of
 * `postgres-faults.property.test.ts`):
 *
 * - a step's function runs only once its `started` record for that attempt has landed, never after
 *   its `done` record (but for a driver whose run was taken over, once per takeover), at most once per
 *   attempt;
 * - every call settles within a deadline with the run or a typed `DurableError` (`run_active`, or
 *   `unavailable` while the file is locked), never a hang, never `lock_timeout` as the run's failure;
 * - within a bound after the locker stops the run completes, with the state and the tool cards of the
 *   same program run alone, its frames' seqs 1, 2, 3… with none missing, and the file's write lock free.
 *
 * `TACKLE_PROPERTY_ROUNDS` sets the number of programs (default 20); `TACKLE_PROPERTY_SEED` replays one.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { createRunner, type DurableStore, type Runner } from "@tackle/durable";
import { createSqliteStore } from "@tackle/durable/sqlite";
import { seededRandom, underLoadMs } from "@tackle/test-support";
import { type Client, checkEnd, emptyTotals, move, type Totals } from "./faults-client.ts";
import { observedStore, settle } from "./postgres-faults.ts";
import { driveAlone, graphOf, Oracle, randomProgram, rounds, seeds } from "./property-programs.ts";

const leaseMs = 150;
const busyTimeoutMs = 25;

let directory: string;
let path: string;
let direct: DurableStore;
let stores: DurableStore[] = [];
let locker: ChildProcess;
before(async () => {
  directory = mkdtempSync(join(tmpdir(), "durable-sqlite-lock-"));
  path = join(directory, "runs.db");
  direct = createSqliteStore({ path });
  for (let index = 0; index < 2; index += 1) stores.push(createSqliteStore({ path, busyTimeoutMs }));
  const child = fileURLToPath(new URL("./sqlite-locker-child.ts", import.meta.url));
  locker = spawn(process.execPath, ["--conditions=@tackle/source", child, path], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  await nextMessage("ready");
});
after(async () => {
  locker?.disconnect();
  for (const store of stores) await store.close();
  stores = [];
  await direct?.close();
  rmSync(directory, { recursive: true, force: true });
});

interface LockCounts {
  holds: number;
  longHolds: number;
}

async function nextMessage<T>(key: string): Promise<T> {
  for (;;) {
    const [message] = (await once(locker, "message")) as [Record<string, unknown>];
    if (key in message) return message[key] as T;
  }
}

/** After the locker stopped: every store answers, and a fresh connection takes the write lock at once. */
async function checkServing(violations: string[]): Promise<void> {
  for (const [index, store] of stores.entries()) {
    await settle(
      () => store.getRun("no-such-thread"),
      underLoadMs(5_000),
      `store ${index}'s read`,
      violations,
    );
  }
  const fresh = new DatabaseSync(path, { timeout: 0 });
  try {
    fresh.exec("BEGIN IMMEDIATE");
    fresh.exec("ROLLBACK");
  } catch (error) {
    violations.push(`the file's write lock was still held after the locker stopped: ${String(error)}`);
  } finally {
    fresh.close();
  }
}

async function checkProgram(seed: number, totals: Totals<LockCounts>): Promise<void> {
  const random = seededRandom(seed);
  const program = randomProgram(random);
  const threadId = `t-${seed}`;
  const runIds = random() < 0.3 ? [`run-${seed}-a`, `run-${seed}-b`] : [`run-${seed}`];
  const where = `seed ${seed}: ${JSON.stringify(program)} as ${runIds.join(", ")}`;
  const reference = await driveAlone(program, seed, { runIds });
  const oracle = new Oracle({ takenOver: true });
  const latencies = seededRandom(seed * 17 + 3);
  const graph = graphOf(program, `p-${seed}`, () => oracle);
  // Some store calls wait a little first, so the locker's holds fall between a drive's writes.
  const latency = () => (latencies() < 0.2 ? Math.floor(latencies() * 60) : 0);
  const runners = stores.map((store) =>
    createRunner({
      store: observedStore(store, direct, () => oracle, latency),
      graphs: [graph],
      leaseMs,
      recover: { everyMs: 1000 },
      maxTakeovers: 1_000,
    }),
  );
  const violations: string[] = [];
  const pick = () => runners[Math.floor(random() * runners.length)] as Runner;
  const client: Client = { graph, threadId, runIds, random, violations, totals };
  try {
    locker.send({ start: seed * 31 + 7, busyTimeoutMs });
    await nextMessage("started");
    const lockedUntil = Date.now() + 300 + Math.floor(random() * 1500);
    let completed = false;
    while (!completed && Date.now() < lockedUntil && violations.length === 0) {
      completed = await move(pick(), client);
    }
    const stopped = nextMessage<LockCounts>("stopped");
    locker.send({ stop: true });
    const counts = await stopped;
    totals.faults.holds += counts.holds;
    totals.faults.longHolds += counts.longHolds;
    const healed = Date.now();
    const bound = underLoadMs(10_000);
    while (!completed && violations.length === 0) {
      if (Date.now() - healed > bound)
        violations.push(`the run did not complete ${bound} ms after the locker stopped`);
      else completed = await move(pick(), client);
    }
    totals.healMs.push(Date.now() - healed);
    await checkServing(violations);
  } finally {
    for (const runner of runners) await runner.close();
  }
  assert.deepEqual(violations, [], where);
  assert.deepEqual(oracle.violations, [], where);
  await checkEnd(where, direct, threadId, oracle, reference, totals);
}

describe("a SQLite file another process holds locked at random moments, against an oracle", () => {
  it("every call settles typed, nothing runs twice or is lost, and the run completes once free", {
    timeout: 600_000,
  }, async () => {
    const totals = emptyTotals<LockCounts>({ holds: 0, longHolds: 0 });
    for (const seed of seeds(rounds(20), 400_000)) await checkProgram(seed, totals);
    const heal = [...totals.healMs].sort((a, b) => a - b);
    console.log(
      `# sqlite lock: ${JSON.stringify({ ...totals, healMs: { median: heal[heal.length >> 1], max: heal.at(-1) } })}`,
    );
    // A run of the property that never told a caller `unavailable` proved nothing.
    if (process.env.TACKLE_PROPERTY_SEED === undefined)
      assert.ok((totals.refused.unavailable ?? 0) > 0, "no call was locked out");
  });
});
