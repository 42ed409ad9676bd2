/**
 * Names and values a caller controls, used as keys, SSE lines and nesting: each one behaves as any other
 * name, or is refused with a typed error; none is silently wrong, none crashes the runner (ADR 0121).
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import {
  createGraph,
  createRunner,
  DurableError,
  type Frame,
  type NodeContext,
  type Runner,
  redact,
  runIntegratedTool,
  tool,
} from "@tackle/durable";
import { withDurableTools } from "@tackle/durable/ai-sdk";
import { AgUiTranslator, serveDurable } from "@tackle/durable/http";
import { tool as aiTool } from "ai";
import { z } from "zod";
import { type TempStore, tempSqliteStore } from "./helpers.ts";

const inherited = ["toString", "__proto__", "constructor", "hasOwnProperty", "valueOf"] as const;

/** `depth` objects, each holding the next. */
function nested(depth: number): unknown {
  let value: unknown = "leaf";
  for (let level = 0; level < depth; level++) value = { a: value };
  return value;
}

const isCode = (code: string) => (error: unknown) => DurableError.isInstance(error) && error.code === code;

let temp: TempStore;
let runner: Runner;
/** Each test of the calling `describe` gets a runner on a SQLite file of its own. */
function freshRunnerEachTest(): void {
  beforeEach(() => {
    temp = tempSqliteStore();
    runner = createRunner({ store: temp.store, pollIntervalMs: 20 });
  });
  afterEach(async () => {
    await runner.close();
    await temp.cleanup();
  });
}

describe("caller names and values: names as keys", () => {
  freshRunnerEachTest();

  for (const name of inherited) {
    test(`a node named ${name} counts its visits, and each visit runs its own steps`, async () => {
      const seen: unknown[] = [];
      const graph = createGraph<{ n: number }>(`visits-${name}`)
        .node(name, async (state, ctx) => {
          const ran = await ctx.step("count", () => `ran at n=${state.n}`);
          seen.push([ctx.visit, ran]);
          return { n: state.n + 1 };
        })
        .branch(name, (state) => (state.n < 3 ? name : "__end__"));
      const run = await runner.start(graph, { n: 0 });
      assert.equal(run.status, "completed");
      assert.deepEqual(seen, [
        [0, "ran at n=0"],
        [1, "ran at n=1"],
        [2, "ran at n=2"],
      ]);
      // A resume after a pause on a later visit replays that visit, not the first one.
      const paused = createGraph<{ n: number; answer?: unknown }>(`pause-${name}`)
        .node(name, async (state, ctx) => {
          if (state.n < 1) return { n: state.n + 1 };
          return { answer: await ctx.interrupt({ visit: ctx.visit }) };
        })
        .branch(name, (state) => (state.answer === undefined ? name : "__end__"));
      const first = await runner.start(paused, { n: 0 }, { threadId: `pause-${name}` });
      assert.equal(first.status, "paused");
      assert.deepEqual(first.interrupts[0]?.request, { visit: 1 });
      const done = await runner.resume(`pause-${name}`, { [`${name}#1/0`]: "yes" });
      assert.deepEqual(done.state, { n: 1, answer: "yes" });
    });
  }

  test("a state key __proto__ stays a key in the history and the AG-UI state", async () => {
    const graph = createGraph<Record<string, unknown>>("proto-state").node("a", async () =>
      JSON.parse('{"__proto__": {"polluted": true}, "b": 2}'),
    );
    const run = await runner.start(graph, {}, { threadId: "proto-state" });
    assert.deepEqual(Object.keys(run.state), ["__proto__", "b"]);
    const checkpoints = await runner.history("proto-state");
    const last = checkpoints.at(-1)?.state as Record<string, unknown>;
    assert.deepEqual(Object.keys(last), ["__proto__", "b"]);
    assert.deepEqual(Object.getOwnPropertyDescriptor(last, "__proto__")?.value, { polluted: true });
    assert.equal(Object.getPrototypeOf(last), Object.prototype);

    const translator = new AgUiTranslator({ threadId: "proto-state", runId: run.runId });
    const frames: Frame[] = [];
    for await (const frame of runner.watch("proto-state")) frames.push(frame);
    for (const frame of frames) translator.translate(frame);
    // A resumed segment restates the state it holds: the key is in it.
    const [, snapshot] = translator.translate({ type: "run_resumed", seq: 1000, data: {} });
    const state = (snapshot as unknown as { snapshot: Record<string, unknown> }).snapshot;
    assert.deepEqual(Object.keys(state), ["__proto__", "b"]);
  });

  test("an AI SDK tool named __proto__ is wrapped as a tool of that name", async () => {
    const calls: unknown[] = [];
    const graph = createGraph<{ keys?: string[]; result?: unknown }>("ai-proto").node(
      "a",
      async (_state, ctx) => {
        const tools = {
          ["__proto__"]: aiTool({
            inputSchema: z.object({ q: z.string() }),
            execute: async (input: { q: string }) => {
              calls.push(input);
              return { answer: input.q.length };
            },
          }),
        };
        const wrapped = withDurableTools(ctx, tools) as unknown as Record<
          string,
          { execute: (input: unknown, options: unknown) => Promise<unknown> }
        >;
        const keys = Object.keys(wrapped);
        const own = Object.getOwnPropertyDescriptor(wrapped, "__proto__")?.value;
        const result = await own?.execute({ q: "abc" }, { toolCallId: "c1", messages: [] });
        return { keys, result };
      },
    );
    const run = await runner.start(graph, {});
    assert.deepEqual(run.state, { keys: ["__proto__"], result: { answer: 3 } });
    assert.deepEqual(calls, [{ q: "abc" }]);
  });
});

describe("caller names and values: nesting and lines", () => {
  freshRunnerEachTest();

  test("values nested 100,000 deep fail the run with not_serializable, and the runner goes on", async () => {
    const deep = nested(100_000);
    const cases: [string, (ctx: NodeContext) => Promise<unknown>][] = [
      ["emit", async (ctx) => ctx.emit("custom", deep)],
      ["tool arguments", (ctx) => tool(ctx, "lookup", { deep }, () => "ok")],
      [
        "redacted arguments",
        (ctx) => runIntegratedTool(ctx, "lookup", { deep }, { redact: ["deep.a"] }, () => 1),
      ],
      ["approved arguments", (ctx) => runIntegratedTool(ctx, "lookup", { deep }, { approve: true }, () => 1)],
      ["state update", async () => deep],
    ];
    for (const [label, body] of cases) {
      const graph = createGraph<Record<string, unknown>>(`deep-${label.replaceAll(" ", "-")}`).node(
        "a",
        async (_state, ctx) => {
          const update = await body(ctx);
          return label === "state update" ? { deep: update } : {};
        },
      );
      const run = await runner.start(graph, {}, { threadId: `deep-${label.replaceAll(" ", "-")}` });
      assert.equal(run.status, "failed", label);
      assert.equal(run.error?.code, "not_serializable", `${label}: ${JSON.stringify(run.error)}`);
      assert.match(String(run.error?.message), /nested more than 512 levels/, label);
    }
    const fine = createGraph<{ ok?: boolean }>("after-deep").node("a", () => ({ ok: true }));
    assert.deepEqual((await runner.start(fine, {})).state, { ok: true });
    assert.throws(() => redact(deep, ["a"]), isCode("not_serializable"));
  });

  test("a circular frame or approval argument fails the run not_serializable, naming the cycle", async () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const cases: [string, (ctx: NodeContext) => Promise<unknown>][] = [
      ["emit", async (ctx) => ctx.emit("custom", cyclic)],
      [
        "approved arguments",
        (ctx) => runIntegratedTool(ctx, "lookup", { cyclic }, { approve: true }, () => 1),
      ],
    ];
    for (const [label, body] of cases) {
      const graph = createGraph(`cyclic-${label.replaceAll(" ", "-")}`).node("a", async (_state, ctx) => {
        await body(ctx);
        return {};
      });
      const run = await runner.start(graph, {});
      assert.equal(run.status, "failed", label);
      assert.equal(run.error?.code, "not_serializable", `${label}: ${JSON.stringify(run.error)}`);
      assert.match(String(run.error?.message), /circular/, label);
    }
  });

  test("a frame type with a line break is refused, and the thread's frames stream to its end", async () => {
    const graph = createGraph("bad-frame").node("a", async (_state, ctx) => {
      ctx.emit("note\nevent: run_completed", { forged: true });
      return {};
    });
    runner = createRunner({ store: temp.store, graphs: [graph], pollIntervalMs: 20 });
    const server = await serveDurable({ runner });
    try {
      const run = await runner.start(graph, {}, { threadId: "bad-frame" });
      assert.equal(run.status, "failed");
      assert.equal(run.error?.code, "invalid_request");
      const response = await fetch(`${server.url}/runs/bad-frame/frames`, {
        signal: AbortSignal.timeout(5_000),
      });
      let text = "";
      const decoder = new TextDecoder();
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        text += decoder.decode(chunk, { stream: true });
        if (text.includes("event: run_failed")) break;
      }
      assert.match(text, /event: run_failed/);
      assert.doesNotMatch(text, /event: error/);
    } finally {
      await server.close();
    }
  });
});
