import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { applyToolCards, type TempStore, tempSqliteStore } from "../../test/helpers.ts";
import { createGraph } from "../graph/create-graph.ts";
import { approve } from "../tool/approve.ts";
import { tool } from "../tool/tool.ts";
import { createRunner } from "./create-runner.ts";

function refundGraph() {
  return createGraph<{ id: string; reply?: string }>("frames-refund").node("task", async (state, ctx) => {
    const order = await tool(ctx, "get_order", { id: state.id }, () => ({ total: 249.9 }));
    const [slow, answer] = await Promise.all([
      tool(ctx, "audit", { id: state.id }, async () => {
        await sleep(30);
        return "logged";
      }),
      (async () => {
        const callId = "task:tool:2";
        const ok = await approve(ctx, { title: "Refund?", toolCallId: callId, params: order });
        if (ok.approved) await tool(ctx, "refund", order, () => ({ refunded: order.total }), { id: callId });
        return ok;
      })(),
    ]);
    return { reply: `${slow}, ${answer.approved ? "refunded" : "kept"}` };
  });
}

describe("frames", () => {
  let temp: TempStore;
  beforeEach(() => {
    temp = tempSqliteStore();
  });
  afterEach(() => temp.cleanup());

  test("tool_call frames share one id through running → completed, and open calls close before the interrupt frame", async () => {
    const runner = createRunner({ store: temp.store });
    const paused = await runner.start(refundGraph(), { id: "ORD-42" }, { threadId: "t" });
    assert.equal(paused.status, "paused");
    const frames = await runner.frames("t");
    const interruptAt = frames.findIndex((frame) => frame.type === "interrupt");
    assert.equal(interruptAt, frames.length - 1);
    const before = applyToolCards(frames.slice(0, interruptAt));
    assert.deepEqual(
      [...before.values()].map((card) => `${card.id} ${card.name} ${card.status}`),
      // The slow audit ran alongside the approval: it finished and landed before the pause.
      ["task:tool:0 get_order completed", "task:tool:1 audit completed"],
    );
    const statuses = frames
      .filter((frame) => frame.type === "tool_call" && (frame.data as { id: string }).id === "task:tool:0")
      .map((frame) => (frame.data as { status: string }).status);
    assert.deepEqual(statuses, ["running", "completed"]);
  });

  test("a resumed run re-emits no duplicate card, and seqs stay strictly increasing across processes", async () => {
    const graph = refundGraph();
    const paused = await createRunner({ store: temp.store }).start(
      graph,
      { id: "ORD-42" },
      { threadId: "t" },
    );
    const fresh = createRunner({ store: temp.reopen(), graphs: [graph] });
    const done = await fresh.resume("t", { [paused.interrupts[0]?.id ?? ""]: true });
    assert.equal(done.state.reply, "logged, refunded");
    const frames = await fresh.frames("t");
    assert.deepEqual(
      frames.map((frame) => frame.seq),
      frames.map((_, index) => index + 1),
    );
    // The resume pass replays get_order and audit from the journal: their cards are not touched again.
    const resumedAt = frames.findIndex((frame) => frame.type === "run_resumed");
    const touched = frames
      .slice(resumedAt)
      .filter((frame) => frame.type === "tool_call")
      .map((frame) => `${(frame.data as { id: string }).id} ${(frame.data as { status: string }).status}`);
    assert.deepEqual(touched, ["task:tool:2 running", "task:tool:2 completed"]);
    const cards = applyToolCards(frames);
    assert.deepEqual([...cards.values()].map((card) => `${card.id} ${card.name} ${card.status}`).sort(), [
      "task:tool:0 get_order completed",
      "task:tool:1 audit completed",
      "task:tool:2 refund completed",
    ]);
  });

  test("an open tool call whose fn pauses is marked awaiting approval, never error", async () => {
    const graph = createGraph("inner-pause").node("n", async (_state, ctx) => {
      await tool(ctx, "transfer", { amount: 5 }, async () => {
        const ok = await ctx.interrupt<boolean>({ title: "Transfer?" });
        return ok ? "sent" : "held";
      });
      return {};
    });
    const runner = createRunner({ store: temp.store });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    const frames = await runner.frames("t");
    const toolFrames = frames
      .filter((frame) => frame.type === "tool_call")
      .map((frame) => (frame.data as { status: string }).status);
    assert.deepEqual(toolFrames, ["running", "awaiting_approval"]);
    assert.equal(frames.at(-1)?.type, "interrupt");
    const done = await runner.resume("t", { [paused.interrupts[0]?.id ?? ""]: true });
    assert.equal(done.status, "completed");
    const cards = applyToolCards(await runner.frames("t"));
    assert.equal(cards.get("n:tool:0")?.status, "completed");
    assert.equal(cards.get("n:tool:0")?.result, "sent");
  });

  test("a reader picks up from any seq, and a watcher streams until the run pauses", async () => {
    const runner = createRunner({ store: temp.store });
    const launched = await runner.launch(refundGraph(), { id: "ORD-1" }, { threadId: "t" });
    const watched: number[] = [];
    for await (const frame of runner.watch("t")) watched.push(frame.seq);
    await launched.finished;
    const all = await runner.frames("t");
    assert.deepEqual(
      watched,
      all.map((frame) => frame.seq),
    );
    for (const from of [0, 3, all.length - 1]) {
      assert.deepEqual(await runner.frames("t", { afterSeq: from }), all.slice(from));
    }
    const tail: number[] = [];
    for await (const frame of runner.watch("t", { afterSeq: 4 })) tail.push(frame.seq);
    assert.deepEqual(
      tail,
      all.slice(4).map((frame) => frame.seq),
    );
  });
});
