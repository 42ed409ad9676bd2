import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { trace } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { createToolSet, defineTool, jsonSchema } from "@tackle/core";
import { applyToolCards, type TempStore, tempSqliteStore } from "../../test/helpers.ts";
import { createGraph } from "../graph/create-graph.ts";
import { isInterrupt } from "../interrupt/interrupt.ts";
import { createRunner } from "../runner/create-runner.ts";
import { approve } from "./approve.ts";
import { tool } from "./tool.ts";

// A fresh SQLite store for every test in this file, whichever block it is in.
let temp: TempStore;
beforeEach(() => {
  temp = tempSqliteStore();
});
afterEach(() => temp.cleanup());

describe("tool() and approve(): failures and interrupts", () => {
  test("a failing fn ends its card as error with the message, and the error reaches the node", async () => {
    let caught: unknown;
    const graph = createGraph("fails").node("n", async (_state, ctx) => {
      try {
        await tool(ctx, "charge", { amount: 5 }, () => {
          throw new Error("card declined");
        });
      } catch (error) {
        caught = error;
      }
      return {};
    });
    const runner = createRunner({ store: temp.store });
    await runner.start(graph, {}, { threadId: "t" });
    assert.equal((caught as Error).message, "card declined");
    const card = applyToolCards(await runner.frames("t")).get("n:tool:0");
    assert.equal(card?.status, "error");
    assert.equal(card?.error, "card declined");
  });

  test("tool layer: an interrupt inside fn is rethrown untouched, never an error card", async () => {
    let seen: unknown;
    const graph = createGraph("tool-layer").node("n", async (_state, ctx) => {
      try {
        await tool(ctx, "wire", {}, () => ctx.interrupt("confirm wire?"));
      } catch (error) {
        seen = error;
        throw error;
      }
      return {};
    });
    const runner = createRunner({ store: temp.store });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    assert.ok(isInterrupt(seen));
    assert.equal(paused.status, "paused");
    const statuses = (await runner.frames("t"))
      .filter((frame) => frame.type === "tool_call")
      .map((frame) => (frame.data as { status: string }).status);
    assert.ok(!statuses.includes("error"), `statuses: ${statuses}`);
  });

  test("wrapper layer: a core toolset.call passes an interrupt through instead of returning { ok: false }", async () => {
    const wire = defineTool({
      name: "bank.wire",
      description: "Wires money after a human confirms",
      input: jsonSchema<{ amount: number }>({ type: "object", properties: { amount: { type: "number" } } }),
      execute: async () => "unused",
    });
    let outcome: unknown;
    const graph = createGraph("wrapper-layer").node("n", async (_state, ctx) => {
      const toolset = createToolSet([
        defineTool({
          ...wire,
          execute: async ({ amount }) => ((await ctx.interrupt<boolean>({ amount })) ? "sent" : "held"),
        }),
      ]);
      try {
        outcome = await toolset.call("bank.wire", { amount: 5 });
      } catch (error) {
        outcome = error;
        throw error;
      }
      return {};
    });
    const runner = createRunner({ store: temp.store });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    assert.ok(isInterrupt(outcome), `toolset.call answered ${JSON.stringify(outcome)}`);
    assert.equal(paused.status, "paused");
  });
});

describe("tool() and approve(): tracing and approvals", () => {
  test("tracing layer: the span of a call that pauses ends without error status", async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    trace.setGlobalTracerProvider(provider);
    try {
      const graph = createGraph("tracing-layer").node("n", async (_state, ctx) => {
        await tool(ctx, "failing", {}, () => {
          throw new Error("boom");
        }).catch(() => {});
        await tool(ctx, "pausing", {}, () => ctx.interrupt("ok?"));
        return {};
      });
      await createRunner({ store: temp.store }).start(graph, {});
      const spans = exporter.getFinishedSpans();
      const byName = new Map(spans.map((span) => [span.name, span]));
      assert.equal(byName.get("execute_tool failing")?.status.code, 2);
      assert.equal(byName.get("execute_tool pausing")?.status.code, 0);
      assert.equal(byName.get("execute_tool pausing")?.attributes["error.type"], undefined);
    } finally {
      trace.disable();
      await provider.shutdown();
    }
  });

  test("an approval is bound to the call id and its arguments: changed arguments ask again, and the tool waits", async () => {
    let amount = 10;
    const charged: number[] = [];
    const graph = createGraph("fingerprint").node("n", async (_state, ctx) => {
      const callId = "n:charge";
      const params = { amount };
      const answer = await approve(ctx, { title: "Charge?", toolCallId: callId, params });
      if (answer.approved)
        await tool(ctx, "charge", params, () => charged.push(params.amount), { id: callId });
      return {};
    });
    const runner = createRunner({ store: temp.store });
    const first = await runner.start(graph, {}, { threadId: "t" });
    const firstId = first.interrupts[0]?.id ?? "";
    assert.match(firstId, /^n:charge:approve:[0-9a-f]{16}$/);
    amount = 20; // the arguments change between the question and the answer
    const second = await runner.resume("t", { [firstId]: true });
    assert.equal(second.status, "paused");
    assert.notEqual(second.interrupts[0]?.id, firstId);
    assert.deepEqual(charged, []);
    const done = await runner.resume("t", { [second.interrupts[0]?.id ?? ""]: true });
    assert.equal(done.status, "completed");
    assert.deepEqual(charged, [20]);
  });
});

describe("primitives for integrations that run tools themselves", () => {
  test("nextToolCallId + toolTrace + ctx.step + isInterrupt produce the same trace as tool()", async () => {
    const { nextToolCallId, toolTrace } = await import("./tool-trace.ts");
    let executions = 0;
    // A hand-written loop, as an integration would write it.
    async function runTool(
      ctx: Parameters<typeof nextToolCallId>[0],
      name: string,
      params: Record<string, unknown>,
    ) {
      const id = nextToolCallId(ctx);
      toolTrace(ctx, { id, name, status: "running", params });
      try {
        const result = await ctx.step(name, async () => {
          executions++;
          await ctx.interrupt({ title: `Run ${name}?` });
          return { ok: true };
        });
        toolTrace(ctx, { id, name, status: "completed", result });
        return result;
      } catch (error) {
        if (isInterrupt(error)) throw error;
        toolTrace(ctx, { id, name, status: "error", error: String(error) });
        throw error;
      }
    }
    const graph = createGraph("primitives").node("n", async (_state, ctx) => {
      await runTool(ctx, "deploy", { env: "prod" });
      return {};
    });
    const runner = createRunner({ store: temp.store });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    const statuses = (await runner.frames("t"))
      .filter((frame) => frame.type === "tool_call")
      .map((frame) => (frame.data as { status: string }).status);
    assert.deepEqual(statuses, ["running", "awaiting_approval"]);
    const done = await runner.resume("t", { [paused.interrupts[0]?.id ?? ""]: true });
    assert.equal(done.status, "completed");
    const card = applyToolCards(await runner.frames("t")).get("n:tool:0");
    assert.deepEqual([card?.status, card?.result], ["completed", { ok: true }]);
    // The step's fn paused the first time, so it ran again on resume (as the same attempt): twice in all.
    assert.equal(executions, 2);
  });
});
