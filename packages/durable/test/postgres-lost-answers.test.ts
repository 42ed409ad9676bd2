/**
 * A write whose answer PostgreSQL's connection lost (ADR 0129), set up every time with a TCP relay in
 * front of the database: the write landed, the runner heard a reset. The run is not failed for it (it
 * was: `tool_failed` "read ECONNRESET", for good), the caller is told `unavailable` (retryable) and not
 * the driver's raw error, the HTTP app answers 503, and the run is finished by a takeover after its
 * lease with its journaled tool not run again. A commit that failed before it landed stops the drive:
 * the writes after it went on, leaving a gap in the frames' seqs and the run paused at the node before
 * with that node's state lost. Found by `postgres-faults.property.test.ts`.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import {
  type CommitBatch,
  createGraph,
  createRunner,
  DurableError,
  type DurableStore,
  tool,
} from "@tackle/durable";
import { createDurableApp } from "@tackle/durable/http";
import { createPostgresStore } from "@tackle/durable/postgres";
import {
  createTestDatabase,
  startTcpRelay,
  type TcpRelay,
  type TestDatabase,
  underLoadMs,
} from "@tackle/test-support";

let database: TestDatabase;
let relay: TcpRelay;
let direct: DurableStore;
let store: DurableStore;
before(async () => {
  database = await createTestDatabase("durable_lost_answers");
  direct = await createPostgresStore({ connectionString: database.url });
  relay = await startTcpRelay(database.url);
  store = await createPostgresStore({ connectionString: relay.url, onError: () => {} });
});
after(async () => {
  await store?.close();
  await direct?.close();
  await relay?.close();
  await database?.drop();
});

const leaseMs = 300;

/** A node that calls one tool, then runs a step; `armed` runs inside the tool, after its marker landed. */
function twoStepGraph(name: string, effects: string[], armed: () => void) {
  return createGraph<{ a?: number; b?: number }>(name).node("work", async (_state, ctx) => {
    const a = await tool(ctx, "charge", { amount: 1 }, () => {
      effects.push("charge");
      armed();
      return 1;
    });
    const b = await ctx.step("after", () => {
      effects.push("after");
      return 2;
    });
    return { a, b };
  });
}

async function completed(threadId: string): Promise<void> {
  const until = Date.now() + underLoadMs(10_000);
  while ((await direct.getRun(threadId))?.status !== "completed" && Date.now() < until) await sleep(50);
  assert.equal((await direct.getRun(threadId))?.status, "completed");
}

it("a commit whose answer was lost leaves the run to a takeover: told unavailable, the tool run once", async () => {
  const effects: string[] = [];
  // The next fenced commit carries the tool's outcome: it lands, its answer is lost.
  const graph = twoStepGraph("lost-commit", effects, () => relay.loseAnswerTo(/WITH fenced AS/));
  const runner = createRunner({ store, graphs: [graph], leaseMs, recover: { everyMs: 1000 } });
  try {
    const error = await runner.start(graph, {}, { threadId: "lost-commit", runId: "r-1" }).then(
      (run) => assert.fail(`the start answered the run ${run.status}: ${JSON.stringify(run.error)}`),
      (thrown: unknown) => thrown,
    );
    assert.ok(DurableError.isInstance(error), `an untyped ${String(error)}`);
    assert.equal(error.code, "unavailable");
    assert.equal(error.retryable, true);
    assert.equal((await direct.getRun("lost-commit"))?.status, "running");
    // No resume from anyone: the sweep takes the run over after its lease.
    await completed("lost-commit");
    assert.deepEqual(effects, ["charge", "after"]);
    const run = await runner.get("lost-commit");
    assert.deepEqual(run?.state, { a: 1, b: 2 });
    // The same start sent again answers the run, completed.
    assert.equal(
      (await runner.start(graph, {}, { threadId: "lost-commit", runId: "r-1" })).status,
      "completed",
    );
  } finally {
    await runner.close();
  }
});

it("a start whose COMMIT's answer was lost is told unavailable, and sent again answers its run", async () => {
  const effects: string[] = [];
  const graph = twoStepGraph("lost-start", effects, () => {});
  const runner = createRunner({ store, graphs: [graph], leaseMs, recover: { everyMs: 1000 } });
  try {
    relay.loseAnswerTo(/COMMIT/);
    await assert.rejects(
      runner.start(graph, {}, { threadId: "lost-start", runId: "r-1" }),
      (error: unknown) => {
        assert.ok(DurableError.isInstance(error), `an untyped ${String(error)}`);
        assert.equal(error.code, "unavailable");
        return true;
      },
    );
    assert.equal((await direct.getRun("lost-start"))?.runId, "r-1");
    const again = await runner.start(graph, {}, { threadId: "lost-start", runId: "r-1" });
    assert.equal(again.runId, "r-1");
    await completed("lost-start");
    assert.deepEqual(effects, ["charge", "after"]);
  } finally {
    await runner.close();
  }
});

it("over HTTP a write whose answer was lost answers 503 unavailable, retryable", async () => {
  const graph = twoStepGraph("lost-http", [], () => {});
  const runner = createRunner({ store, graphs: [graph], leaseMs, recover: { everyMs: 1000 } });
  const app = createDurableApp({ runner });
  try {
    relay.loseAnswerTo(/COMMIT/);
    const answer = await app.request("http://127.0.0.1/runs", {
      method: "POST",
      headers: { "content-type": "application/json", host: "127.0.0.1" },
      body: JSON.stringify({ graph: "lost-http", input: {}, threadId: "lost-http", runId: "r-1" }),
    });
    assert.equal(answer.status, 503);
    const body = (await answer.json()) as { error: { code: string; retryable: boolean; message: string } };
    assert.equal(body.error.code, "unavailable");
    assert.equal(body.error.retryable, true);
    assert.doesNotMatch(body.error.message, /ECONNRESET|127\.0\.0\.1/);
    await completed("lost-http");
  } finally {
    await runner.close();
  }
});

it("a transition whose commit failed before it landed is not written past: no gap, no lost state", async () => {
  // The relay's connections drop as the commit of node a's transition goes out (carried alone: node b
  // pauses at once), so it fails without landing; node b's pause is the next write.
  let cuts = 0;
  const cutting: DurableStore = {
    ...store,
    commit(threadId: string, owner: string, batch: CommitBatch) {
      if (cuts === 0 && batch.frames?.some((frame) => frame.type === "node_completed")) {
        cuts += 1;
        relay.cut();
      }
      return store.commit(threadId, owner, batch);
    },
  };
  const graph = createGraph<{ x?: number; y?: string }>("lost-transition")
    .node("a", async (_state, ctx) => ({ x: await ctx.step("s", () => 1) }))
    .node("b", async (_state, ctx) => ({ y: String(await ctx.interrupt({ ask: "y" })) }))
    .edge("a", "b");
  const runner = createRunner({ store: cutting, graphs: [graph], leaseMs, recover: { everyMs: 1000 } });
  const seqs = async () => (await direct.readFrames("lost-transition", 0)).map((frame) => frame.seq);
  try {
    await assert.rejects(runner.start(graph, {}, { threadId: "lost-transition" }), (error: unknown) => {
      assert.ok(DurableError.isInstance(error), `an untyped ${String(error)}`);
      assert.equal(error.code, "unavailable");
      return true;
    });
    assert.equal(cuts, 1);
    const written = await seqs();
    assert.deepEqual(
      written,
      written.map((_seq, index) => index + 1),
      "no seq is skipped",
    );
    // The sweep takes the run over; it pauses at b with a's state.
    const until = Date.now() + underLoadMs(10_000);
    while ((await direct.getRun("lost-transition"))?.status !== "paused" && Date.now() < until)
      await sleep(50);
    const paused = await runner.get<{ x?: number }>("lost-transition");
    assert.equal(paused?.status, "paused");
    assert.equal(paused?.node, "b");
    assert.deepEqual(paused?.state, { x: 1 });
    const [open] = paused?.interrupts ?? [];
    const done = await runner.resume<{ x?: number; y?: string }>("lost-transition", {
      [String(open?.id)]: "yes",
    });
    assert.deepEqual(done.state, { x: 1, y: "yes" });
    const all = await seqs();
    assert.deepEqual(
      all,
      all.map((_seq, index) => index + 1),
      "no seq is skipped",
    );
  } finally {
    await runner.close();
  }
});
