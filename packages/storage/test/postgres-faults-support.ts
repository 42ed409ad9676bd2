/**
 * The parts of `postgres-faults.property.test.ts`: one round's random plan and the faults injected at
 * random moments (the callers are in `postgres-faults-callers.ts`).
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { PostgresMigration } from "@tackle/storage/postgres";
import type { TcpRelay } from "@tackle/test-support";
import pg from "pg";

/** The statements a loss can be armed on (the latin1 text of what the client sends). */
export const statementPatterns: readonly (readonly [string, RegExp])[] = [
  ["COMMIT", /COMMIT/],
  ["BEGIN", /BEGIN/],
  ["INSERT", /INSERT/],
  ["UPDATE", /UPDATE/],
  ["FOR UPDATE", /FOR UPDATE/],
  ["advisory lock", /pg_advisory_lock\(/],
  ["advisory unlock", /pg_advisory_unlock/],
  ["advisory xact lock", /pg_advisory_xact_lock/],
  ["lock_timeout", /lock_timeout/],
  ["tackle_migrations", /tackle_migrations/],
  ["ROLLBACK", /ROLLBACK/],
  ["SELECT", /SELECT/],
];

export interface MigratorPlan {
  readonly pool: number;
  /** How many of the round's migrations this migrator knows (older code knows a prefix). */
  readonly knows: number;
  /** A wait for the lock of a few ms, which may end `lock_timeout`; else a generous one, which must not. */
  readonly shortWait: boolean;
}

export interface RoundPlan {
  readonly store: string;
  readonly migrations: readonly PostgresMigration[];
  readonly migrators: readonly MigratorPlan[];
  /** Transactions each of the two transaction callers runs. */
  readonly transactions: number;
  /** How long faults are injected, in ms (quiet machine). */
  readonly faultMs: number;
}

/**
 * A random list of 1–6 migrations for `store`: each records itself in `fault_applied` (no key there,
 * so a second application shows as a second row) and creates a table; some sleep, some are a
 * function of several statements rather than one string.
 */
export function planRound(round: number, random: () => number, pools: number): RoundPlan {
  const store = `f${round}`;
  const count = 1 + Math.floor(random() * 6);
  const migrations: PostgresMigration[] = [];
  for (let version = 1; version <= count; version++) {
    const pause = random() < 0.3 ? `SELECT pg_sleep(${(0.005 + random() * 0.04).toFixed(3)});` : "";
    // The attempt that applied it, set by the caller's wrapper (none for the last, unwrapped migrator).
    const record = `INSERT INTO fault_applied (store, version, attempt)
      VALUES ('${store}', ${version}, current_setting('fault.attempt', true))`;
    const create = `CREATE TABLE ${store}_v${version} (id int)`;
    migrations.push(
      random() < 0.5
        ? { version, name: `${store}.${version}`, up: `${pause}${record}; ${create}` }
        : {
            version,
            name: `${store}.${version}`,
            up: async (client) => {
              if (pause !== "") await client.query(pause);
              await client.query(record);
              await client.query(create);
            },
          },
    );
  }
  const migrators = Array.from({ length: 2 + Math.floor(random() * 3) }, () => ({
    pool: Math.floor(random() * pools),
    knows: random() < 0.7 ? count : 1 + Math.floor(random() * count),
    shortWait: random() < 0.25,
  }));
  return {
    store,
    migrations,
    migrators,
    transactions: 2 + Math.floor(random() * 5),
    faultMs: 150 + Math.floor(random() * 600),
  };
}

/** How long a stall past the deadline lasts at least, and the check made as it ends (still stalled). */
export interface StallPlan {
  readonly pastMs: number;
  readonly atEnd: (stalledAt: number) => void;
}

export interface FaultTally {
  [kind: string]: number;
}

/**
 * Injects faults every 0–40 ms until `stop()`: a lost answer to a random statement (a `COMMIT` in half
 * of them; gated on the round, so a loss left armed when the round ends never fires later), a lost
 * next answer, a cut, a session terminated by the server (`admin` is a direct pool), a down window
 * of 10–200 ms, or a stall (a half-open network) of 10–200 ms or of `stalls.pastMs` and more, which
 * `stalls.atEnd` checks before it ends. `onCommitLost` is told as a COMMIT whose answer will be lost goes through.
 */
export function injectFaults(
  relay: TcpRelay,
  admin: pg.Pool,
  random: () => number,
  tally: FaultTally,
  onCommitLost: () => void,
  stalls: StallPlan,
) {
  const round = { on: true };
  const count = (kind: string) => {
    tally[kind] = (tally[kind] ?? 0) + 1;
  };
  const running = (async () => {
    while (round.on) {
      await sleep(Math.floor(random() * 40));
      if (!round.on) break;
      const pick = random();
      if (pick < 0.6) {
        // A COMMIT half the time: the ambiguous loss, the one exactly-once hinges on.
        const [name, pattern] =
          random() < 0.5
            ? statementPatterns[0]!
            : statementPatterns[Math.floor(random() * statementPatterns.length)]!;
        relay.loseAnswerTo((text) => {
          if (!round.on || !pattern.test(text)) return false;
          if (name === "COMMIT") onCommitLost();
          return true;
        });
        count(`lose ${name}`);
      } else if (pick < 0.7) {
        relay.loseNextAnswer();
        count("lose next");
      } else if (pick < 0.8) {
        relay.cut();
        count("cut");
      } else if (pick < 0.83) {
        // A network that silently stops delivering (ADR 0574): shorter than the pools' query deadline
        // half the time, else past it, so queries in flight time out and their connections are
        // destroyed while the server still holds their sessions until the stall ends.
        const past = random() < 0.5;
        const stalledAt = Date.now();
        relay.stall();
        count(past ? "stall past the deadline" : "short stall");
        await sleep(past ? stalls.pastMs + Math.floor(random() * 200) : 10 + Math.floor(random() * 190));
        if (past) stalls.atEnd(stalledAt);
        relay.unstall();
      } else if (pick < 0.88) {
        // The server ends a random session of the pools (a restart's or an operator's 57P01), and the
        // fault lasts until that session is gone (the signal is asynchronous).
        await terminateOne(admin);
        count("terminate");
      } else {
        relay.down();
        count("down");
        await sleep(10 + Math.floor(random() * 190));
        relay.up();
      }
    }
  })();
  return {
    async stop() {
      round.on = false;
      await running;
      relay.unstall();
      relay.up();
    },
  };
}

/** Terminates a random session of the pools and waits (up to 2 s) until it has ended. */
async function terminateOne(admin: pg.Pool): Promise<void> {
  const { rows } = await admin.query<{ pid: number }>(
    `SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity
      WHERE application_name LIKE 'faults\\_%' ORDER BY random() LIMIT 1`,
  );
  const pid = rows[0]?.pid;
  for (let tries = 0; pid !== undefined && tries < 200; tries++) {
    const alive = await admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [pid]);
    if (alive.rowCount === 0) return;
    await sleep(10);
  }
}

/**
 * Consumes a `loseNextAnswer()` the faults left armed (the relay has no way to disarm it): a
 * throwaway connection through the relay takes the loss, or connects when none is armed.
 */
export async function drainArmedLoss(relay: TcpRelay): Promise<void> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const client = new pg.Client({ connectionString: relay.url });
    client.on("error", () => undefined);
    try {
      await client.connect();
      await client.query("SELECT 1");
      await client.end();
      return;
    } catch {
      await client.end().catch(() => undefined);
    }
  }
}
