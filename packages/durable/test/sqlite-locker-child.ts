/**
 * The third connection of `sqlite-lock.property.test.ts`, in a process of its own (node:sqlite is
 * synchronous: a lock held in the runners' process could not be let go while a store waits on it). Told
 * `{ start: seed, busyTimeoutMs }`, it takes the file's write lock (`BEGIN IMMEDIATE`) again and again at
 * random moments and holds it for a random period, a third of them past the stores' busy timeout; told
 * `stop`, it lets go and answers what it did.
 */
import { DatabaseSync } from "node:sqlite";
import { setTimeout as sleep } from "node:timers/promises";
import { seededRandom } from "@tackle/test-support";

const path = process.argv[2] as string;
const database = new DatabaseSync(path, { timeout: 5000 });
let running: Promise<{ holds: number; longHolds: number }> | undefined;
let stopped = false;

async function hold(seed: number, busyTimeoutMs: number) {
  const random = seededRandom(seed);
  const counts = { holds: 0, longHolds: 0 };
  // Each program its own density: locks now and then, or the file locked most of the time.
  const maxGapMs = 10 + Math.floor(random() * 150);
  while (!stopped) {
    await sleep(Math.floor(random() * maxGapMs));
    if (stopped) break;
    const long = random() < 0.35;
    const heldMs = long
      ? busyTimeoutMs + 5 + Math.floor(random() * busyTimeoutMs * 4)
      : Math.floor(random() * busyTimeoutMs * 0.8);
    database.exec("BEGIN IMMEDIATE");
    counts.holds += 1;
    if (long) counts.longHolds += 1;
    await sleep(heldMs);
    database.exec("ROLLBACK");
  }
  return counts;
}

process.on("message", (message: { start?: number; busyTimeoutMs?: number; stop?: true }) => {
  if (message.start !== undefined) {
    stopped = false;
    running = hold(message.start, message.busyTimeoutMs ?? 25);
    process.send?.({ started: true });
  } else if (message.stop) {
    stopped = true;
    void running?.then((counts) => process.send?.({ stopped: counts }));
  }
});
process.on("disconnect", () => {
  database.close();
  process.exit(0);
});
process.send?.({ ready: true });
