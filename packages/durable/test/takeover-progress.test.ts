/**
 * The takeover limit counts takeovers in a row with no progress, not takeovers over a run's life: a
 * long run whose drivers are restarted many times (deploys), or that pauses for approvals and is
 * resumed, completes however often it was taken over, while a run that keeps killing its drivers is
 * still stopped after `maxTakeovers` takeovers with nothing done between them. On SQLite and PostgreSQL.
 *
 * A driver "dies" by hanging forever (its process would be gone); the next runner takes the run over
 * with a bare resume (leaseMs 0: the old driver is known dead), as the sweep does.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createGraph, createRunner, type DurableStore, END } from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import { tempSqliteStore } from "./helpers.ts";

const forever = () => new Promise<never>(() => {});

/** Waits (5 s at most) until the run's journal holds `count` steps with an outcome. */
async function stepsLanded(store: DurableStore, threadId: string, count: number): Promise<void> {
  const until = Date.now() + 5000;
  for (;;) {
    const done = (await store.readJournal(threadId)).filter((record) => record.state === "done").length;
    if (done >= count) return;
    if (Date.now() > until) throw new Error(`${count} steps did not land within 5 s (${done} did)`);
    await sleep(10);
  }
}

/** Waits (5 s at most) until a step's `attempt` is in flight (its `started` record landed). */
async function stepInFlight(
  store: DurableStore,
  threadId: string,
  name: string,
  attempt: number,
): Promise<void> {
  const until = Date.now() + 5000;
  for (;;) {
    const journal = await store.readJournal(threadId);
    const started = (record: { name: string; state: string; attempt: number }) =>
      record.name === name && record.state === "started" && record.attempt === attempt;
    if (journal.some(started)) return;
    if (Date.now() > until) throw new Error(`step "${name}" attempt ${attempt} did not start within 5 s`);
    await sleep(10);
  }
}

/**
 * Node "a" runs steps s0..s<steps-1>; each driver completes one new step and then dies, except that
 * the last step's driver goes on (to the end, or into `poison`, a step that kills every driver).
 */
function progressingGraph(name: string, steps: number, poison: boolean) {
  const calls: Record<string, number> = {};
  const count = (step: string) => {
    calls[step] = (calls[step] ?? 0) + 1;
  };
  const graph = createGraph<{ total?: number }>(name).node("a", async (_state, ctx) => {
    let total = 0;
    for (let i = 0; i < steps; i++) {
      let fresh = false;
      total += await ctx.step(`s${i}`, () => {
        count(`s${i}`);
        fresh = true;
        return i;
      });
      if (fresh && (poison || i < steps - 1)) await forever();
    }
    if (poison) {
      await ctx.step("poison", async () => {
        count("poison");
        await forever();
      });
    }
    return { total };
  });
  return { graph, calls };
}

type StoreKind = "sqlite" | "postgres";

let database: TestDatabase;
before(async () => {
  database = await createTestDatabase("tackle_durable_progress");
});
after(async () => {
  await database?.drop();
});

let tables = 0;
async function openStore(kind: StoreKind): Promise<{ store: DurableStore; close(): Promise<void> }> {
  if (kind === "sqlite") {
    const temp = tempSqliteStore();
    return { store: temp.store, close: () => temp.cleanup() };
  }
  // Tables of its own per test, as a private schema would be.
  const store = await createPostgresStore({ connectionString: database.url, tablePrefix: `p${++tables}_` });
  return { store, close: () => store.close() };
}

for (const kind of ["sqlite", "postgres"] as const) {
  describe(`${kind}: the takeover limit counts takeovers with no progress between them`, () => {
    test("a run taken over maxTakeovers + 1 times, a step completing between each, completes", async () => {
      const { store, close } = await openStore(kind);
      try {
        const { graph, calls } = progressingGraph(`progress-${kind}`, 5, false);
        await createRunner({ store, graphs: [graph], leaseMs: 0 }).launch(graph, {}, { threadId: "t" });
        await stepsLanded(store, "t", 1);
        // Default maxTakeovers (3): four takeovers, each after a step completed.
        for (let i = 1; i <= 3; i++) {
          const launched = await createRunner({ store, graphs: [graph], leaseMs: 0 }).launchResume("t");
          assert.ok(launched.firstSeq > 0, `takeover ${i} took the run`);
          await stepsLanded(store, "t", i + 1);
        }
        const last = createRunner({ store, graphs: [graph], leaseMs: 0 });
        const ended = await last.resume("t");
        assert.equal(ended.status, "completed", JSON.stringify(ended.error));
        assert.deepEqual(ended.state, { total: 10 });
        assert.deepEqual(calls, { s0: 1, s1: 1, s2: 1, s3: 1, s4: 1 });
        const recovered = (await last.frames("t")).filter((frame) => frame.type === "run_recovered");
        assert.deepEqual(
          recovered.map((frame) => frame.data),
          [1, 2, 3, 4].map((stepsDone) => ({ stepsDone })),
        );
      } finally {
        await close();
      }
    });

    test("a run that makes progress and then kills every driver is stopped after maxTakeovers takeovers with none", async () => {
      const { store, close } = await openStore(kind);
      try {
        const { graph, calls } = progressingGraph(`turns-poison-${kind}`, 3, true);
        await createRunner({ store, graphs: [graph], leaseMs: 0 }).launch(graph, {}, { threadId: "t" });
        await stepsLanded(store, "t", 1);
        // Two takeovers with progress (s1, s2), then three that die in "poison" with nothing done.
        for (let i = 1; i <= 5; i++) {
          const launched = await createRunner({ store, graphs: [graph], leaseMs: 0 }).launchResume("t");
          assert.ok(launched.firstSeq > 0, `takeover ${i} took the run`);
          if (i <= 2) await stepsLanded(store, "t", i + 1);
          else await stepInFlight(store, "t", "poison", i - 2);
        }
        assert.equal(calls.poison, 3);
        const last = createRunner({ store, graphs: [graph], leaseMs: 0 });
        const ended = await last.resume("t");
        assert.equal(ended.status, "failed");
        const error = ended.error as { code: string; message: string; data: Record<string, unknown> };
        assert.equal(error.code, "takeover_limit");
        assert.match(error.message, /taken over 3 times in a row with no progress/);
        assert.deepEqual(error.data, { takeovers: 3, maxTakeovers: 3, node: "a", step: "poison" });
        assert.equal(calls.poison, 3, "the poison step did not run a fourth time");
        assert.deepEqual([calls.s0, calls.s1, calls.s2], [1, 1, 1]);
      } finally {
        await close();
      }
    });

    test("pauses for approval and resumes reset the count: a run restarted after every resume completes", async () => {
      const { store, close } = await openStore(kind);
      try {
        // No steps at all: only the pauses and resumes are progress. Each resumed driver dies once.
        let dieNext = true;
        const graph = createGraph<{ round: number }>(`approvals-${kind}`)
          .node("ask", async (state, ctx) => {
            if (dieNext) {
              dieNext = false;
              await forever();
            }
            await ctx.interrupt({ approve: state.round }, { id: `go-${state.round}` });
            return { round: state.round + 1 };
          })
          .branch("ask", (state) => (state.round < 2 ? "ask" : END));
        const maxTakeovers = 1;
        const died = async () => {
          const until = Date.now() + 5000;
          while (dieNext && Date.now() < until) await sleep(5);
          assert.equal(dieNext, false, "the driver reached the node within 5 s");
        };
        const runner = () => createRunner({ store, graphs: [graph], leaseMs: 0, maxTakeovers });
        await runner().launch(graph, { round: 0 }, { threadId: "t" });
        await died();
        for (const round of [0, 1]) {
          const paused = await runner().resume("t");
          assert.equal(paused.status, "paused", JSON.stringify(paused.error));
          assert.deepEqual(
            paused.interrupts.map((entry) => entry.id),
            [`go-${round}`],
          );
          dieNext = true;
          const resumed = await runner().launchResume("t", { [`go-${round}`]: true });
          assert.ok(resumed.firstSeq > 0);
          await died();
        }
        // The third takeover (maxTakeovers 1), with a pause and a resume before each.
        const ended = await runner().resume("t");
        assert.equal(ended.status, "completed", JSON.stringify(ended.error));
        assert.deepEqual(ended.state, { round: 2 });
        const frames = await runner().frames("t");
        assert.equal(frames.filter((frame) => frame.type === "run_recovered").length, 3);
      } finally {
        await close();
      }
    });
  });
}
