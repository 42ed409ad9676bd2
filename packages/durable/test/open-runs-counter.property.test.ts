/**
 * The open-runs counters (ADR 0127) as a property against an oracle, in memory, on one SQLite file and
 * on PostgreSQL, two runners each (on PostgreSQL two pools, as two processes): rounds of random
 * concurrent starts, forks, restarts of ended threads, answers, declines (the run fails), cancels,
 * deletes, expiries and prunes, by two tenants. While a round runs, every recount the store reads at one
 * moment agrees with its counters and stays within the bound; after each round every tenant's counter
 * is its open runs as stored and as the oracle knows them, and no start was admitted past the bound nor
 * refused below it.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep, setImmediate as turn } from "node:timers/promises";
import {
  type ApprovalAnswer,
  approve,
  createGraph,
  createMemoryStore,
  createRunner,
  DurableError,
  type DurableStore,
  type Runner,
  type RunStatus,
} from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createTestDatabase, seededRandom, type TestDatabase } from "@tackle/test-support";
import { tempSqliteStore } from "./helpers.ts";
import { rounds, seeds } from "./property-programs.ts";

type Gate = { expiresInMs: number; answer?: unknown };
const hour = 60 * 60 * 1000;
/** A run that pauses at an approval: answered it completes, declined it fails, expired it completes. */
const gate = createGraph<Gate>("counted").node("ask", async (state, ctx) => {
  const answer = (await approve(ctx, {
    title: "Go on?",
    params: {},
    expiresInMs: state.expiresInMs,
  })) as ApprovalAnswer;
  if (!answer.approved && answer.expired !== true) throw new Error("declined");
  return { answer };
});

const max = 5;
const tenants = ["acme/", "globex/"] as const;
/** What the programs exercised, printed at the end. */
const totals = { operations: 0, admitted: 0, refused: 0, closed: 0, expired: 0, pruned: 0, polls: 0 };

interface Engine {
  readonly stores: readonly DurableStore[];
  close(): Promise<void>;
}

/** The oracle's view of one tenant: its threads by id, and which of them hold a place. */
interface Tenant {
  readonly prefix: string;
  /** Open threads, with whether their approval expires soon (settled at each round's end). */
  readonly open: Map<string, { expiring: boolean }>;
  /** Ended threads still stored. */
  readonly ended: Set<string>;
}

type Opener = { kind: "start" | "fork" | "restart"; threadId: string; expiring: boolean };
type Closer = { kind: "approve" | "decline" | "cancel" | "delete"; threadId: string };

/**
 * The outcome of a call: "ok" with the run's status when it answered one, or the code of the typed error
 * it threw (an untyped one fails the test).
 */
async function outcome(call: Promise<unknown>): Promise<string> {
  try {
    const answered = (await call) as { status?: string } | undefined;
    return typeof answered === "object" && typeof answered?.status === "string"
      ? `ok:${answered.status}`
      : "ok";
  } catch (error) {
    assert.ok(DurableError.isInstance(error), `an untyped error: ${String(error)}`);
    return error.code;
  }
}

function opener(runner: Runner, tenant: Tenant, op: Opener, source: string | undefined): Promise<unknown> {
  const input = { expiresInMs: op.expiring ? 5 + (op.threadId.length % 7) * 6 : 2 * hour };
  const openLimit = { prefix: tenant.prefix, max };
  if (op.kind === "fork") {
    return runner
      .history(source as string)
      .then(([first]) =>
        runner.fork(source as string, { seq: first?.seq ?? 0, threadId: op.threadId, input, openLimit }),
      );
  }
  return runner.start(gate, input, { threadId: op.threadId, openLimit });
}

async function closer(runner: Runner, op: Closer): Promise<unknown> {
  if (op.kind === "cancel") return runner.cancel(op.threadId);
  if (op.kind === "delete") return runner.deleteThread(op.threadId);
  const run = await runner.get(op.threadId);
  return runner.resume(op.threadId, { [run?.interrupts[0]?.id ?? ""]: { approved: op.kind === "approve" } });
}

/** Waits (with a deadline) for every run whose approval expires soon to end, expired. */
async function settleExpiries(runner: Runner, tenant: Tenant, seed: number): Promise<void> {
  for (const [threadId, { expiring }] of tenant.open) {
    if (!expiring) continue;
    const deadline = Date.now() + 10_000;
    for (;;) {
      const status = (await runner.get(threadId))?.status;
      if (status === "completed") break;
      assert.ok(status === "paused" || status === "running", `seed ${seed}: ${threadId} ${status}`);
      assert.ok(Date.now() < deadline, `seed ${seed}: ${threadId} never expired`);
      await sleep(5);
    }
    tenant.open.delete(threadId);
    tenant.ended.add(threadId);
    totals.expired++;
  }
}

/** One round of one tenant's operations, all at once; the oracle learns what landed. */
async function tenantRound(
  engine: { runners: readonly Runner[]; next: () => number; seed: number; made: { n: number } },
  tenant: Tenant,
): Promise<void> {
  const { runners, next, seed } = engine;
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
  const free = max - tenant.open.size;
  const closers: Closer[] = [...tenant.open.keys()]
    .filter(() => next() < 0.35)
    .map((threadId) => ({ kind: pick(["approve", "decline", "cancel", "delete"] as const), threadId }));
  const restarts = [...tenant.ended].filter(() => next() < 0.15);
  const sources = [...tenant.open.keys(), ...tenant.ended].filter(
    (id) => !restarts.includes(id) && !closers.some((op) => op.kind === "delete" && op.threadId === id),
  );
  const openers: Opener[] = Array.from({ length: Math.floor(next() * (max + 1)) }, () => ({
    kind: sources.length > 0 && next() < 0.3 ? ("fork" as const) : ("start" as const),
    threadId: `${tenant.prefix}s${seed}-t${engine.made.n++}`,
    expiring: next() < 0.15,
  }));
  for (const threadId of restarts) openers.push({ kind: "restart", threadId, expiring: next() < 0.15 });
  const opened = openers.map((op) =>
    outcome(opener(pick(runners), tenant, op, op.kind === "fork" ? pick(sources) : undefined)),
  );
  const closed = closers.map((op) => outcome(closer(pick(runners), op)));
  const [openCodes, closeCodes] = await Promise.all([Promise.all(opened), Promise.all(closed)]);
  closers.forEach((op, i) => {
    assert.match(
      closeCodes[i] ?? "",
      /^ok(:(completed|failed|cancelled))?$/,
      `seed ${seed}: ${op.kind} ${op.threadId}`,
    );
    tenant.open.delete(op.threadId);
    if (op.kind !== "delete") tenant.ended.add(op.threadId);
  });
  let admitted = 0;
  let admittedBriefly = 0;
  for (const [i, op] of openers.entries()) {
    const code = openCodes[i] ?? "";
    if (code.startsWith("ok")) {
      admitted++;
      // A restarted thread may end at once: its journal still holds the answer its last run was given.
      if (code !== "ok:paused") {
        assert.match(code, /^ok:(completed|failed)$/, `seed ${seed}: ${op.kind} ${op.threadId}`);
        admittedBriefly++;
        tenant.open.delete(op.threadId);
        tenant.ended.add(op.threadId);
        continue;
      }
      if (op.expiring) admittedBriefly++;
      tenant.ended.delete(op.threadId);
      tenant.open.set(op.threadId, { expiring: op.expiring });
      continue;
    }
    assert.equal(code, "too_many_open_runs", `seed ${seed}: ${op.kind} ${op.threadId}`);
    const stored = await pick(runners).get(op.threadId);
    if (op.kind === "restart")
      assert.notEqual(stored?.status, "paused", `seed ${seed}: refused, not reopened`);
    else assert.equal(stored, undefined, `seed ${seed}: refused ${op.kind}, nothing stored`);
  }
  totals.operations += openers.length + closers.length;
  totals.admitted += admitted;
  totals.refused += openers.length - admitted;
  totals.closed += closers.length;
  // Refused only at the bound: the places free as the round began stayed free for its openers.
  assert.ok(admitted >= Math.min(openers.length, free), `seed ${seed}: ${admitted} admitted, ${free} free`);
  // And no opener took a place nobody freed (a run that ended or expired within the round frees one).
  assert.ok(admitted <= free + closers.length + admittedBriefly, `seed ${seed}: admitted past the bound`);
}

/** A prune of one tenant's threads in some statuses, paused ones among them at times. */
async function pruneRound(runner: Runner, tenant: Tenant, next: () => number, seed: number): Promise<void> {
  const statuses: RunStatus[] =
    next() < 0.5 ? ["completed", "failed", "cancelled", "paused"] : ["completed", "cancelled"];
  const pruned = await runner.prune({ olderThanMs: 0, prefix: tenant.prefix, statuses });
  for (const threadId of pruned) {
    assert.ok(tenant.open.has(threadId) || tenant.ended.has(threadId), `seed ${seed}: pruned ${threadId}`);
    tenant.open.delete(threadId);
    tenant.ended.delete(threadId);
  }
  totals.pruned += pruned.length;
  totals.operations++;
}

/** Every recount the store reads agrees with its counters and stays within the bound. */
function checkCounts(
  counts: Awaited<ReturnType<DurableStore["recountOpenRuns"]>>,
  seed: number,
  when: string,
) {
  totals.polls++;
  for (const count of counts) {
    assert.equal(count.counter, count.recounted, `seed ${seed} ${when}: ${count.prefix} drifted`);
    assert.ok(count.counter <= max, `seed ${seed} ${when}: ${count.prefix} holds ${count.counter} > ${max}`);
  }
}

async function runProgram(engine: Engine, seed: number, roundCount: number): Promise<void> {
  const next = seededRandom(seed);
  const runners = engine.stores.map((store) => createRunner({ store, graphs: [gate] }));
  const made = { n: 0 };
  const state = tenants.map((prefix): Tenant => ({ prefix, open: new Map(), ended: new Set() }));
  try {
    for (let round = 0; round < roundCount; round++) {
      let polling = true;
      const poller = (async () => {
        const store = (engine.stores[1] ?? engine.stores[0]) as DurableStore;
        while (polling) {
          checkCounts(await store.recountOpenRuns(), seed, `round ${round}`);
          await turn();
        }
      })();
      await Promise.all(
        state.map((tenant) =>
          next() < 0.1
            ? pruneRound(runners[0] as Runner, tenant, next, seed)
            : tenantRound({ runners, next, seed, made }, tenant),
        ),
      );
      polling = false;
      await poller;
      for (const tenant of state) await settleExpiries(runners[0] as Runner, tenant, seed);
      const counts = await (engine.stores[0] as DurableStore).recountOpenRuns();
      checkCounts(counts, seed, `after round ${round}`);
      for (const tenant of state) {
        const stored = await (runners[0] as Runner).threads({ prefix: tenant.prefix, limit: 1000 });
        const open = stored.filter((thread) => thread.status === "paused" || thread.status === "running");
        assert.deepEqual(
          open.map((thread) => thread.threadId).sort(),
          [...tenant.open.keys()].sort(),
          `seed ${seed} round ${round}: open runs`,
        );
        const counter = counts.find((count) => count.prefix === tenant.prefix)?.counter ?? 0;
        assert.equal(counter, tenant.open.size, `seed ${seed} round ${round}: ${tenant.prefix} counter`);
      }
    }
  } finally {
    for (const runner of runners) await runner.close();
  }
}

const programs = (engine: string, count: number, roundCount: number, open: () => Promise<Engine>) => {
  for (const seed of seeds(count, 9100)) {
    test(`${engine}: seed ${seed}, ${roundCount} rounds of two tenants' concurrent opens and closes`, async () => {
      const opened = await open();
      try {
        await runProgram(opened, seed, roundCount);
      } finally {
        await opened.close();
      }
    });
  }
};

describe("open-runs counters against an oracle (ADR 0127)", () => {
  after(() => console.log(`# ${JSON.stringify(totals)}`));
  programs("in memory", rounds(6), 40, async () => {
    const store = createMemoryStore();
    return { stores: [store, store], close: async () => {} };
  });
  programs("SQLite file, two handles", rounds(3), 30, async () => {
    const file = tempSqliteStore();
    return { stores: [file.store, file.reopen()], close: () => file.cleanup() };
  });
  let database: TestDatabase;
  before(async () => {
    database = await createTestDatabase("durable_open_counter");
  });
  after(async () => {
    await database.drop();
  });
  programs("PostgreSQL, two pools", rounds(2), 30, async () => {
    const stores = [
      await createPostgresStore({ connectionString: database.url }),
      await createPostgresStore({ connectionString: database.url }),
    ];
    // Each program starts from empty tables: the places of the one before are given back with its runs.
    await (stores[0] as DurableStore).pruneThreads({
      updatedBefore: "9999",
      statuses: ["running", "paused", "completed", "failed", "cancelled"],
    });
    return {
      stores,
      close: async () => Promise.all(stores.map((store) => store.close())).then(() => undefined),
    };
  });
});
