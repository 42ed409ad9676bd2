/**
 * The open-runs bound under concurrency (ADR 0123), on PostgreSQL with two runners on two pools (as two
 * processes): rounds of random concurrent starts, answers and cancels on one tenant, checked against an
 * oracle. The tenant never holds more than `max` open runs (a poller counts the rows throughout each
 * round), a start is refused only at the bound (at least the places free when the round began are
 * taken), and the stored open runs are the oracle's after every round.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { approve, createGraph, createRunner, type DurableStore, type Runner } from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createTestDatabase, seededRandom, type TestDatabase } from "@tackle/test-support";
import pg from "pg";

const gate = createGraph<{ answer?: unknown }>("gate").node("ask", async (_state, ctx) => ({
  answer: await approve(ctx, { title: "Go on?", params: {} }),
}));

const rounds = Number(process.env.OPEN_RUNS_ROUNDS ?? 120);
const max = 6;
const prefix = "acme/";

/** A small seeded generator, so a failing seed can be replayed. */

let database: TestDatabase;
let stores: DurableStore[];
let runners: Runner[];
let pool: pg.Pool;

before(async () => {
  database = await createTestDatabase("durable_open_races");
  stores = [
    await createPostgresStore({ connectionString: database.url }),
    await createPostgresStore({ connectionString: database.url }),
  ];
  runners = stores.map((store) => createRunner({ store, graphs: [gate] }));
  pool = new pg.Pool({ connectionString: database.url, max: 2 });
});

after(async () => {
  for (const runner of runners) await runner.close();
  for (const store of stores) await store.close();
  await pool.end();
  await database.drop();
});

async function openRows(): Promise<number> {
  const result = await pool.query<{ n: string }>(
    `SELECT count(*) AS n FROM durable_runs WHERE status IN ('running', 'paused') AND thread_id LIKE 'acme/%'`,
  );
  return Number(result.rows[0]?.n ?? 0);
}

test(`PostgreSQL: ${rounds} rounds of concurrent starts, answers and cancels never pass ${max} open runs`, async () => {
  const seed = Number(process.env.OPEN_RUNS_SEED ?? Date.now() % 1_000_000);
  const next = seededRandom(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
  /** The oracle: the tenant's paused threads. */
  const open = new Set<string>();
  let made = 0;
  let refusedAtBound = 0;
  for (let round = 0; round < rounds; round++) {
    const free = max - open.size;
    const starts = 1 + Math.floor(next() * (max + 2));
    const closing = [...open].filter(() => next() < 0.3);
    const operations: Promise<{ kind: "start" | "close"; threadId: string; ok: boolean }>[] = [];
    for (let i = 0; i < starts; i++) {
      const threadId = `${prefix}t${made++}`;
      operations.push(
        pick(runners)
          .start(gate, {}, { threadId, openLimit: { prefix, max } })
          .then(
            (snapshot) => {
              assert.equal(snapshot.status, "paused");
              return { kind: "start" as const, threadId, ok: true };
            },
            (error: { code?: string }) => {
              assert.equal(error.code, "too_many_open_runs", `seed ${seed}: ${String(error)}`);
              return { kind: "start" as const, threadId, ok: false };
            },
          ),
      );
    }
    for (const threadId of closing) {
      const runner = pick(runners);
      const close =
        next() < 0.5
          ? runner.cancel(threadId)
          : runner
              .get(threadId)
              .then((run) => runner.resume(threadId, { [run?.interrupts[0]?.id ?? ""]: { approved: true } }));
      operations.push(
        close.then((run) => ({ kind: "close" as const, threadId, ok: run.status !== "paused" })),
      );
    }
    // Counted throughout the round, from outside the runners.
    let polling = true;
    let most = 0;
    const poller = (async () => {
      while (polling) most = Math.max(most, await openRows());
    })();
    const results = await Promise.all(operations);
    polling = false;
    await poller;
    const accepted = results.filter((result) => result.kind === "start" && result.ok);
    for (const result of results) {
      if (result.kind === "close") {
        assert.ok(result.ok, `seed ${seed}: ${result.threadId} was closed`);
        open.delete(result.threadId);
      } else if (result.ok) open.add(result.threadId);
      else
        assert.equal(
          await runners[0]?.get(result.threadId),
          undefined,
          `seed ${seed}: refused, nothing stored`,
        );
    }
    refusedAtBound += starts - accepted.length;
    assert.ok(most <= max, `seed ${seed} round ${round}: ${most} open runs seen, over ${max}`);
    assert.ok(open.size <= max, `seed ${seed} round ${round}: ${open.size} open after the round`);
    // Refused only at the bound: the places free as the round began were free throughout it.
    assert.ok(
      accepted.length >= Math.min(starts, free),
      `seed ${seed} round ${round}: ${accepted.length} of ${starts} starts passed with ${free} places free`,
    );
    // And no start took a place nobody freed.
    assert.ok(accepted.length <= free + closing.length, `seed ${seed} round ${round}: too many passed`);
    assert.equal(
      await openRows(),
      open.size,
      `seed ${seed} round ${round}: the store agrees with the oracle`,
    );
  }
  assert.ok(refusedAtBound > 0, "the rounds reached the bound");
});
