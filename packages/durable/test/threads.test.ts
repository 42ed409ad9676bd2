/** Threads of many runs: state carried, runs listed and read, cancel, delete, prune — scoped per tenant over HTTP. */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import {
  createGraph,
  createRunner,
  DurableError,
  type Runner,
  runIntegratedTool,
  tool,
} from "@tackle/durable";
import { serveDurable } from "@tackle/durable/http";
import { applyToolCards, type TempStore, tempSqliteStore } from "./helpers.ts";

interface Counter {
  count?: number;
  note?: string;
}
const counter = createGraph<Counter>("counter").node("n", async (state, ctx) => {
  const next = await tool(ctx, "increment", { from: state.count ?? 0 }, () => (state.count ?? 0) + 1);
  return { count: next };
});

const gated = createGraph<{ amount: number; reply?: unknown }>("gated").node("pay", async (state, ctx) => {
  const reply = await runIntegratedTool(
    ctx,
    "charge",
    { amount: state.amount },
    { approve: true },
    () => "charged",
  );
  return { reply };
});

const signals: AbortSignal[] = [];
const slow = createGraph("slow").node("wait", async (_state, ctx) => {
  await ctx.step("long", (info) => {
    signals.push(info.signal);
    return new Promise((_resolve, reject) => {
      info.signal.addEventListener("abort", () => reject(info.signal.reason));
    });
  });
  return {};
});

const isCode = (code: string) => (error: unknown) => DurableError.isInstance(error) && error.code === code;

describe("threads", () => {
  let temp: TempStore;
  let runner: Runner;
  beforeEach(() => {
    temp = tempSqliteStore();
    runner = createRunner({ store: temp.store, graphs: [counter, gated, slow] });
  });
  afterEach(async () => {
    await runner.close();
    await temp.cleanup();
  });

  test("many runs on one thread: state carries over, runs are listed, each run's frames read apart", async () => {
    const first = await runner.start(counter, {}, { threadId: "t" });
    const second = await runner.start(counter, { note: "again" }, { threadId: "t" });
    assert.equal(first.state.count, 1);
    assert.deepEqual(second.state, { count: 2, note: "again" });
    assert.notEqual(first.runId, second.runId);
    const runs = await runner.runs("t");
    assert.deepEqual(
      runs.map((run) => [run.runId, run.status]),
      [
        [first.runId, "completed"],
        [second.runId, "completed"],
      ],
    );
    const firstFrames = await runner.frames("t", { runId: first.runId });
    assert.equal(firstFrames[0]?.type, "run_started");
    assert.equal(firstFrames.at(-1)?.type, "run_completed");
    assert.equal((firstFrames[0]?.data as { runId: string } | undefined)?.runId, first.runId);
    const secondFrames = await runner.frames("t", { runId: second.runId });
    assert.equal(secondFrames[0]?.seq, (firstFrames.at(-1)?.seq ?? 0) + 1);
    // Tool-call ids stay unique across the thread's runs (one card each in the thread's log).
    assert.deepEqual([...applyToolCards(await runner.frames("t")).keys()], ["n:tool:0", "n:tool:1"]);
    await assert.rejects(runner.frames("t", { runId: "nope" }), isCode("not_found"));
    const [thread] = await runner.threads();
    assert.deepEqual([thread?.threadId, thread?.runId, thread?.status], ["t", second.runId, "completed"]);
  });

  test("a thread with a paused run takes no new run until it is resumed or cancelled", async () => {
    await runner.start(gated, { amount: 1 }, { threadId: "t" });
    await assert.rejects(runner.start(gated, { amount: 2 }, { threadId: "t" }), isCode("thread_active"));
  });

  test("cancel a paused run: its pending approval is cancelled in the journal and on the card; the thread goes on", async () => {
    const paused = await runner.start(gated, { amount: 5 }, { threadId: "t" });
    const id = paused.interrupts[0]?.id ?? "";
    const cancelled = await runner.cancel("t", "customer left");
    assert.equal(cancelled.status, "cancelled");
    assert.deepEqual(cancelled.interrupts, []);
    const answer = (await temp.store.readJournal("t")).find((record) => record.key === `answer:${id}`);
    assert.match(answer?.value ?? "", /"cancelled":true/);
    const card = applyToolCards(await runner.frames("t")).get("pay:tool:0");
    assert.deepEqual([card?.status, card?.reason], ["cancelled", "customer left"]);
    assert.equal((await runner.frames("t")).at(-1)?.type, "run_cancelled");
    await assert.rejects(runner.resume("t", { [id]: { approved: true } }), isCode("run_cancelled"));
    // Cancelling again is harmless; a new run may start.
    assert.equal((await runner.cancel("t")).status, "cancelled");
    const next = await runner.start(gated, { amount: 6 }, { threadId: "t" });
    assert.equal(next.status, "paused");
    assert.deepEqual(
      (await runner.runs("t")).map((run) => run.status),
      ["cancelled", "paused"],
    );
  });

  test("cancel a running run: the in-flight step's signal aborts and the run ends cancelled", async () => {
    signals.length = 0;
    const launched = await runner.launch(slow, {}, { threadId: "t" });
    while (signals.length === 0) await sleep(5);
    const cancelled = await runner.cancel("t", "stop");
    assert.equal(cancelled.status, "cancelled");
    assert.equal(signals[0]?.aborted, true);
    assert.equal((signals[0]?.reason as DurableError | undefined)?.code, "run_cancelled");
    const settled = await launched.finished;
    assert.equal(settled.status, "cancelled");
    const frames = await runner.frames("t");
    assert.equal(frames.at(-1)?.type, "run_cancelled");
    assert.ok(!frames.some((frame) => frame.type === "run_failed"));
    await assert.rejects(runner.cancel("t-missing"), isCode("not_found"));
  });

  test("delete a thread with its journal and frames; a running one is refused", async () => {
    await runner.start(counter, {}, { threadId: "t" });
    assert.ok((await temp.store.readJournal("t")).length > 0);
    assert.equal(await runner.deleteThread("t"), true);
    assert.equal(await runner.get("t"), undefined);
    assert.deepEqual(await temp.store.readJournal("t"), []);
    assert.deepEqual(await temp.store.readFrames("t", 0), []);
    assert.equal(await runner.deleteThread("t"), false);
    signals.length = 0;
    const launched = await runner.launch(slow, {}, { threadId: "busy" });
    while (signals.length === 0) await sleep(5);
    await assert.rejects(runner.deleteThread("busy"), isCode("thread_active"));
    await runner.cancel("busy");
    await launched.finished;
    assert.equal(await runner.deleteThread("busy"), true);
  });

  test("prune by age removes ended threads older than the cut, and keeps paused and recent ones", async () => {
    await runner.start(counter, {}, { threadId: "old-done" });
    await runner.start(gated, { amount: 1 }, { threadId: "old-paused" });
    await sleep(50);
    await runner.start(counter, {}, { threadId: "new-done" });
    const pruned = await runner.prune({ olderThanMs: 40 });
    assert.deepEqual(pruned, ["old-done"]);
    assert.deepEqual(
      (await runner.threads()).map((thread) => thread.threadId),
      ["new-done", "old-paused"],
    );
    assert.deepEqual(await temp.store.readJournal("old-done"), []);
  });
});

test("over HTTP every thread operation is scoped to the caller's tenant", async () => {
  const temp = tempSqliteStore();
  const runner = createRunner({ store: temp.store, graphs: [counter, gated] });
  const server = await serveDurable({
    runner,
    authenticate: (request) => request.headers.get("x-tenant") ?? undefined,
  });
  const call = async (tenant: string, method: string, path: string, body?: unknown) => {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: { "x-tenant": tenant, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: response.status === 204 ? undefined : await response.json() };
  };
  try {
    assert.equal(
      (await call("a", "POST", "/runs", { graph: "counter", threadId: "same", input: {} })).status,
      201,
    );
    assert.equal(
      (await call("b", "POST", "/runs", { graph: "gated", threadId: "same", input: { amount: 1 } })).status,
      201,
    );
    await runner.idle();
    assert.equal(
      (await call("a", "POST", "/runs", { graph: "counter", threadId: "same", input: {} })).status,
      201,
    );
    await runner.idle();
    const listA = (await call("a", "GET", "/threads")).body as {
      threads: { threadId: string; graph: string }[];
    };
    assert.deepEqual(
      listA.threads.map((thread) => [thread.threadId, thread.graph]),
      [["same", "counter"]],
    );
    const runsA = (await call("a", "GET", "/threads/same/runs")).body as { runs: { runId: string }[] };
    assert.equal(runsA.runs.length, 2);
    const framesA = (await call("a", "GET", `/threads/same/runs/${runsA.runs[0]?.runId}/frames`)).body as {
      frames: { type: string }[];
    };
    assert.equal(framesA.frames.at(-1)?.type, "run_completed");
    // b cannot see a's runs, nor cancel or delete them; its own paused run it can.
    assert.equal((await call("b", "GET", `/threads/same/runs/${runsA.runs[0]?.runId}/frames`)).status, 404);
    assert.equal((await call("b", "POST", "/runs/same/cancel", {})).body.status, "cancelled");
    assert.equal((await call("a", "GET", "/runs/same")).body.status, "completed");
    assert.deepEqual((await call("b", "POST", "/threads/prune", { olderThanMs: 0 })).body, {
      pruned: ["same"],
    });
    assert.equal((await call("a", "GET", "/runs/same")).status, 200);
    assert.equal((await call("a", "DELETE", "/threads/same")).status, 204);
    assert.equal((await call("a", "DELETE", "/threads/same")).status, 404);
    assert.deepEqual((await call("a", "GET", "/threads")).body, { threads: [] });
  } finally {
    await server.close();
    await runner.close();
    await temp.cleanup();
  }
});
