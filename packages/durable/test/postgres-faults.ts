/**
 * What `postgres-faults.property.test.ts` drives with: the runners' stores as the oracle sees them
 * (every write that landed, even one whose answer the relay lost), the faults drawn at random moments
 * (a lost answer to a COMMIT or a write statement, a cut, a short outage), and a client that does what
 * the durable README tells a user to do when a call fails.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { DurableError, type DurableStore } from "@tackle/durable";
import type { TcpRelay } from "@tackle/test-support";
import pg from "pg";
import type { Oracle } from "./property-programs.ts";

/**
 * The store a runner is given, seen by the oracle: a call that succeeded reports its write, and a call
 * that failed (its answer lost, its connection cut) has the journal read again straight from the
 * database (not through the relay) before the caller hears of the failure, so a write that landed
 * unheard is known to the oracle before the driver can go on. A call waits `latencyMs()` first, then
 * `beforeCall()` runs (a cut there fails the call before its statement reaches the database).
 */
export function observedStore(
  base: DurableStore,
  direct: DurableStore,
  oracle: () => Oracle | undefined,
  latencyMs: () => number = () => 0,
  beforeCall: (method: string) => void = () => {},
) {
  return new Proxy(base, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function" || property === "close") return value;
      return async (...args: unknown[]) => {
        const wait = latencyMs();
        if (wait > 0) await sleep(wait);
        beforeCall(String(property));
        try {
          const result = await (value as (...parameters: unknown[]) => Promise<unknown>).apply(target, args);
          oracle()?.storeCallLanded(String(property), args, result);
          return result;
        } catch (error) {
          const watching = oracle();
          const first = args[0] as string | { threadId?: unknown };
          const threadId = typeof first === "string" ? first : first?.threadId;
          const writes = property === "createRun" || property === "claimRun" || property === "commit";
          if (watching !== undefined && writes && typeof threadId === "string") {
            watching.landed(await direct.readJournal(threadId));
          }
          throw error;
        }
      };
    },
  });
}

/** The statements the store sends that a fault may pick: the answer to the next one that matches is lost. */
export const faultPatterns: readonly { readonly name: string; readonly match: RegExp }[] = [
  { name: "COMMIT", match: /COMMIT/ },
  { name: "fenced commit", match: /WITH fenced AS/ },
  { name: "journal write", match: /INSERT INTO \w*journal/ },
  { name: "frame write", match: /INSERT INTO \w*frames/ },
  { name: "run insert", match: /INSERT INTO \w*runs/ },
  { name: "claim (FOR UPDATE)", match: /FOR UPDATE/ },
  { name: "run read", match: /SELECT \* FROM \w*runs/ },
  { name: "journal read", match: /FROM \w*journal/ },
  { name: "BEGIN", match: /BEGIN/ },
];

/** A text every pattern matches: sent through the relay until it is answered, it disarms what is left. */
const everyPattern =
  "SELECT 'COMMIT WITH fenced AS INSERT INTO x_journal INSERT INTO x_frames INSERT INTO x_runs FOR UPDATE SELECT * FROM x_runs FROM x_journal BEGIN' AS disarm";

export interface FaultCounts {
  lost: number;
  cuts: number;
  outages: number;
  /** One runner cut off alone while it ran a slow tool (`postgres-faults.property.test.ts`). */
  partitions: number;
  byPattern: Record<string, number>;
}

export const emptyFaults = (): FaultCounts => ({
  lost: 0,
  cuts: 0,
  outages: 0,
  partitions: 0,
  byPattern: {},
});

/**
 * Draws faults at random moments until `stop()`: a lost answer to a random statement, a cut of every
 * connection, or an outage of up to `maxOutageMs`. `stop()` heals the relay and disarms every loss
 * still armed, so what follows runs on a sound network.
 */
export function startFaults(relay: TcpRelay, random: () => number, counts: FaultCounts, maxOutageMs: number) {
  let stopped = false;
  // Dense faults stop a run in its tracks; sparse ones strike it as it goes: each program draws its own.
  const maxGapMs = 20 + Math.floor(random() * 200);
  const loop = (async () => {
    while (!stopped) {
      await sleep(Math.floor(random() * maxGapMs));
      if (stopped) break;
      const pick = random();
      if (pick < 0.7) {
        const pattern = faultPatterns[
          Math.floor(random() * faultPatterns.length)
        ] as (typeof faultPatterns)[0];
        relay.loseAnswerTo(pattern.match);
        counts.lost += 1;
        counts.byPattern[pattern.name] = (counts.byPattern[pattern.name] ?? 0) + 1;
      } else if (pick < 0.85) {
        relay.cut();
        counts.cuts += 1;
      } else {
        relay.down();
        counts.outages += 1;
        await sleep(10 + Math.floor(random() * maxOutageMs));
        relay.up();
      }
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      relay.up();
      await disarm(relay.url);
    },
  };
}

/** Sends a statement every armed loss matches until one is answered: then none is armed. */
async function disarm(url: string): Promise<void> {
  for (let tries = 0; tries < 200; tries += 1) {
    const client = new pg.Client({ connectionString: url });
    client.on("error", () => {});
    try {
      await client.connect();
      await client.query(everyPattern);
      return;
    } catch {
      // Its answer was lost: one armed loss fewer.
    } finally {
      await client.end().catch(() => {});
    }
  }
  throw new Error("the relay kept losing answers after 200 disarming statements");
}

/** The codes a client may be told while the database fails under the runner (all but these are defects). */
export const expectedCodes = new Set(["run_active", "unavailable"]);

/** A call's outcome: its value, or the error it was told, within `deadlineMs` (else a violation). */
export async function settle<T>(
  call: () => Promise<T>,
  deadlineMs: number,
  what: string,
  violations: string[],
): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<"hung">((resolve) => {
    timer = setTimeout(() => resolve("hung"), deadlineMs);
  });
  const called = call().then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
  const outcome = await Promise.race([called, hung]);
  clearTimeout(timer);
  if (outcome === "hung") {
    violations.push(`${what} did not settle within ${deadlineMs} ms`);
    return { ok: false, error: new Error("hung") };
  }
  if (!outcome.ok && !(DurableError.isInstance(outcome.error) && expectedCodes.has(outcome.error.code))) {
    violations.push(`${what} was told ${describe(outcome.error)}`);
  }
  return outcome;
}

export function describe(error: unknown): string {
  if (DurableError.isInstance(error)) return `${error.code}: ${error.message}`;
  const code = (error as { code?: unknown } | null)?.code;
  return `an untyped ${String(error)}${code === undefined ? "" : ` (code ${String(code)})`}`;
}

/**
 * After the relay healed: every store's pool answers a read within `deadlineMs` (none wedged), and no
 * session of the database is left inside a transaction (no lock held by a connection the faults broke).
 */
export async function checkServing(
  stores: readonly DurableStore[],
  databaseUrl: string,
  deadlineMs: number,
  violations: string[],
): Promise<void> {
  for (const [index, store] of stores.entries()) {
    await settle(
      () => store.getRun("no-such-thread"),
      deadlineMs,
      `store ${index}'s read after healing`,
      violations,
    );
  }
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const until = Date.now() + deadlineMs;
    for (;;) {
      const { rows } = await client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database()
         AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'`,
      );
      if ((rows[0]?.n ?? 0) === 0) return;
      if (Date.now() > until) {
        violations.push(`${rows[0]?.n} sessions left idle in a transaction after healing`);
        return;
      }
      await sleep(50);
    }
  } finally {
    await client.end();
  }
}
