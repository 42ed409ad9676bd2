import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { type TempStore, tempSqliteStore } from "../../test/helpers.ts";
import { DurableError } from "../errors/durable-error.ts";
import { createGraph, END } from "../graph/create-graph.ts";
import { approve } from "../tool/approve.ts";
import { tool } from "../tool/tool.ts";
import { createRunner } from "./create-runner.ts";

function code(expected: string) {
  return (error: unknown) => DurableError.isInstance(error) && error.code === expected;
}

// A fresh SQLite store for every test in this file, whichever block it is in.
let temp: TempStore;
beforeEach(() => {
  temp = tempSqliteStore();
});
afterEach(() => temp.cleanup());

describe("interrupts: asking and answering", () => {
  test("several in one node: asked one after another, each answered by its id", async () => {
    const graph = createGraph<{ name?: string; age?: number }>("form").node("ask", async (_state, ctx) => {
      const name = await ctx.interrupt<string>({ field: "name" });
      const age = await ctx.interrupt<number>({ field: "age" });
      return { name, age };
    });
    const runner = createRunner({ store: temp.store });
    const first = await runner.start(graph, {}, { threadId: "t" });
    assert.deepEqual(first.interrupts, [{ id: "ask#0/0", request: { field: "name" } }]);
    const second = await runner.resume("t", { "ask#0/0": "Ada" });
    assert.deepEqual(second.interrupts, [{ id: "ask#0/1", request: { field: "age" } }]);
    const done = await runner.resume("t", { "ask#0/1": 36 });
    assert.deepEqual(done.state, { name: "Ada", age: 36 });
  });

  test("in a loop: each visit of the node asks with its own id", async () => {
    const graph = createGraph<{ items: string[] }>("loop")
      .node("collect", async (state, ctx) => {
        const item = await ctx.interrupt<string>({ prompt: `item ${state.items.length + 1}` });
        return { items: [...state.items, item] };
      })
      .branch("collect", (state) => (state.items.length < 3 ? "collect" : END));
    const runner = createRunner({ store: temp.store });
    let snapshot = await runner.start(graph, { items: [] }, { threadId: "t" });
    const ids: string[] = [];
    while (snapshot.status === "paused") {
      const id = snapshot.interrupts[0]?.id ?? "";
      ids.push(id);
      snapshot = await runner.resume("t", { [id]: `x${ids.length}` });
    }
    assert.deepEqual(ids, ["collect#0/0", "collect#1/0", "collect#2/0"]);
    assert.deepEqual(snapshot.state.items, ["x1", "x2", "x3"]);
  });

  test("in parallel tool calls: every approval is open at once and every one must be answered", async () => {
    const executed: string[] = [];
    const graph = createGraph<{ done?: boolean }>("parallel").node("pay", async (_state, ctx) => {
      await Promise.all(
        ["alice", "bob"].map(async (who) => {
          const id = `pay:${who}`;
          const answer = await approve(ctx, { title: `Pay ${who}?`, toolCallId: id, params: { who } });
          if (answer.approved) await tool(ctx, "pay", { who }, () => executed.push(who), { id });
        }),
      );
      return { done: true };
    });
    const runner = createRunner({ store: temp.store });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    assert.equal(paused.interrupts.length, 2);
    const [alice, bob] = paused.interrupts.map((entry) => entry.id) as [string, string];
    await assert.rejects(runner.resume("t", { [alice]: true }), code("unanswered_interrupts"));
    await assert.rejects(runner.resume("t", { [alice]: true, nope: true }), code("unknown_interrupt"));
    assert.equal((await runner.get("t"))?.status, "paused");
    const done = await runner.resume("t", { [alice]: true, [bob]: { approved: false, reason: "no" } });
    assert.equal(done.status, "completed");
    assert.deepEqual(executed, ["alice"]);
  });
});

describe("interrupts: replayed and repeated resumes", () => {
  test("replaying the same resume is harmless; a different answer to the same id is refused", async () => {
    let refunds = 0;
    const graph = createGraph("replay").node("n", async (_state, ctx) => {
      await approve(ctx, { title: "Refund?" });
      await tool(ctx, "refund", {}, () => {
        refunds++;
      });
      return {};
    });
    const runner = createRunner({ store: temp.store });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    const answers = { [paused.interrupts[0]?.id ?? ""]: { approved: true } };
    assert.equal((await runner.resume("t", answers)).status, "completed");
    assert.equal((await runner.resume("t", answers)).status, "completed");
    assert.equal(refunds, 1);
    await assert.rejects(
      runner.resume("t", { [paused.interrupts[0]?.id ?? ""]: { approved: false } }),
      code("answer_conflict"),
    );
    await assert.rejects(runner.resume("t", { other: 1 }), code("run_not_paused"));
    await assert.rejects(runner.resume("missing", {}), code("not_found"));
  });

  test("a resume sent twice while the resumed run is still driving here is a harmless replay; new answers are refused", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let ran = 0;
    const graph = createGraph("gate").node("a", async (_state, ctx) => {
      await ctx.interrupt({ ok: "?" }, { id: "ok" });
      await ctx.step("slow", async () => {
        ran++;
        await gate;
      });
    });
    const runner = createRunner({ store: temp.store });
    assert.equal((await runner.start(graph, {}, { threadId: "t" })).status, "paused");
    const first = await runner.launchResume("t", { ok: true });
    const again = await runner.launchResume("t", { ok: true });
    assert.equal(again.firstSeq, 0, "the replay started nothing");
    assert.equal(again.runId, first.runId);
    await assert.rejects(runner.launchResume("t", { ok: false }), code("answer_conflict"));
    await assert.rejects(runner.launchResume("t", { ok: true, other: 1 }), code("run_active"));
    await assert.rejects(runner.launchResume("t"), code("run_active"));
    release();
    assert.equal((await first.finished).status, "completed");
    assert.equal(ran, 1);
  });

  test("a start with a run id the thread already has starts nothing and answers that run", async () => {
    let ran = 0;
    const graph = createGraph<{ n?: number }>("once").node("a", async (_state, ctx) => {
      await ctx.step("work", () => {
        ran++;
      });
      return { n: ran };
    });
    const runner = createRunner({ store: temp.store });
    const first = await runner.start(graph, {}, { threadId: "t", runId: "r1" });
    assert.equal(first.status, "completed");
    const replay = await runner.launch(graph, {}, { threadId: "t", runId: "r1" });
    assert.deepEqual([replay.runId, replay.firstSeq], ["r1", 0]);
    // A later run on the thread, then the first start once more: still nothing started.
    assert.equal((await runner.start(graph, {}, { threadId: "t", runId: "r2" })).status, "completed");
    assert.equal((await runner.launch(graph, {}, { threadId: "t", runId: "r1" })).firstSeq, 0);
    assert.equal(ran, 2);
    assert.deepEqual(
      (await runner.runs("t")).map((run) => run.runId),
      ["r1", "r2"],
    );
    await assert.rejects(runner.launch(graph, {}, { runId: "" }), code("invalid_request"));
  });
});
