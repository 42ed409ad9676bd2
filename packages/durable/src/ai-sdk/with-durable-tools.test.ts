import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import type { LanguageModelV4GenerateResult } from "@ai-sdk/provider";
import { tool as aiTool, generateText, stepCountIs } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import { applyToolCards, type TempStore, tempSqliteStore } from "../../test/helpers.ts";
import { createGraph } from "../graph/create-graph.ts";
import type { ToolPolicies } from "../policy/tool-policy.ts";
import { createRunner } from "../runner/create-runner.ts";
import { durableModel, withDurableTools } from "./index.ts";

// The hosted model is the only mock: the AI SDK's own MockLanguageModelV4 scripts the turns.
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

function toolCalls(...calls: [string, string, unknown][]): LanguageModelV4GenerateResult {
  return {
    content: calls.map(([toolCallId, toolName, input]) => ({
      type: "tool-call" as const,
      toolCallId,
      toolName,
      input: JSON.stringify(input),
    })),
    finishReason: { unified: "tool-calls", raw: "tool_calls" },
    usage,
    warnings: [],
  };
}

function text(value: string): LanguageModelV4GenerateResult {
  return {
    content: [{ type: "text", text: value }],
    finishReason: { unified: "stop", raw: "stop" },
    usage,
    warnings: [],
  };
}

// A fresh SQLite store for every test in this file, whichever block it is in.
let temp: TempStore;
beforeEach(() => {
  temp = tempSqliteStore();
});
afterEach(() => temp.cleanup());

describe("/ai-sdk withDurableTools: journal and approval", () => {
  test("an agent's tools journal, pause for approval, redact frames only, and never report the pause as a tool error", async () => {
    const charged: { cardNumber: string; amount: number }[] = [];
    const lookups: string[] = [];
    const toolErrors: unknown[] = [];
    const model = new MockLanguageModelV4({
      doGenerate: [
        toolCalls(
          ["m1", "lookup", { id: "ORD-42" }],
          ["m2", "charge", { cardNumber: "4242424242424242", amount: 249.9 }],
        ),
        text("Charged 249.9."),
      ],
    });
    const tools = {
      lookup: aiTool({
        description: "Looks an order up",
        inputSchema: z.object({ id: z.string() }),
        execute: async ({ id }) => {
          lookups.push(id);
          return { id, total: 249.9 };
        },
      }),
      charge: aiTool({
        description: "Charges a card",
        inputSchema: z.object({ cardNumber: z.string(), amount: z.number() }),
        execute: async (input) => {
          charged.push(input);
          return { ok: true, cardNumber: input.cardNumber };
        },
      }),
    };
    // Policies are plain data: they survive a trip through JSON.
    const policies = JSON.parse(
      JSON.stringify({
        charge: { approve: true, redact: ["cardNumber"] },
        lookup: { show: true },
      } satisfies ToolPolicies),
    ) as ToolPolicies;
    const graph = createGraph<{ reply?: string }>("agent").node("agent", async (_state, ctx) => {
      const result = await generateText({
        model: durableModel(ctx, model),
        tools: withDurableTools(ctx, tools, policies),
        prompt: "Refund ORD-42",
        stopWhen: stepCountIs(3),
        abortSignal: ctx.signal,
        onStepFinish: (step) => {
          toolErrors.push(...step.content.filter((part) => part.type === "tool-error"));
        },
      });
      return { reply: result.text };
    });
    const runner = createRunner({ store: temp.store });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    assert.equal(paused.status, "paused");
    assert.equal(paused.interrupts.length, 1);
    const request = paused.interrupts[0]?.request as { toolName: string; params: { cardNumber: string } };
    assert.equal(request.toolName, "charge");
    assert.equal(request.params.cardNumber, "[redacted]");
    assert.deepEqual(charged, []);

    const done = await runner.resume("t", { [paused.interrupts[0]?.id ?? ""]: { approved: true } });
    assert.equal(done.status, "completed");
    assert.equal(done.state.reply, "Charged 249.9.");
    // The tool got the real card number; the model was asked twice in all, the lookup ran once.
    assert.deepEqual(charged, [{ cardNumber: "4242424242424242", amount: 249.9 }]);
    assert.deepEqual(lookups, ["ORD-42"]);
    assert.equal(model.doGenerateCalls.length, 2);
    assert.deepEqual(toolErrors, []);

    const frames = await runner.frames("t");
    assert.ok(!JSON.stringify(frames).includes("4242424242424242"), "no frame shows the card number");
    const cards = applyToolCards(frames);
    assert.deepEqual(
      [...cards.values()].map((card) => `${card.id} ${card.name} ${card.status}`),
      ["agent:tool:0 lookup completed", "agent:tool:1 charge completed"],
    );
    assert.deepEqual(cards.get("agent:tool:1")?.result, { ok: true, cardNumber: "[redacted]" });
  });
});

describe("/ai-sdk withDurableTools: hidden and declined calls, policies", () => {
  test("a tool whose policy says show: false runs once across pause and resume and no tool_call frame names it", async () => {
    const audits: string[] = [];
    const model = new MockLanguageModelV4({
      doGenerate: [
        toolCalls(["m1", "audit", { note: "refund" }], ["m2", "charge", { amount: 5 }]),
        text("Done."),
      ],
    });
    const graph = createGraph<{ reply?: string }>("hidden").node("agent", async (_state, ctx) => {
      const result = await generateText({
        model: durableModel(ctx, model),
        tools: withDurableTools(
          ctx,
          {
            audit: aiTool({
              description: "Writes an audit note",
              inputSchema: z.object({ note: z.string() }),
              execute: async ({ note }) => {
                audits.push(note);
                return "noted";
              },
            }),
            charge: aiTool({
              description: "Charges",
              inputSchema: z.object({ amount: z.number() }),
              execute: async () => "charged",
            }),
          },
          { audit: { show: false }, charge: { approve: true } },
        ),
        prompt: "refund",
        stopWhen: stepCountIs(3),
        abortSignal: ctx.signal,
      });
      return { reply: result.text };
    });
    const runner = createRunner({ store: temp.store });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    assert.equal(paused.status, "paused");
    const done = await runner.resume("t", { [paused.interrupts[0]?.id ?? ""]: { approved: true } });
    assert.equal(done.status, "completed");
    assert.deepEqual(audits, ["refund"], "the hidden tool's side effect happened once");
    const frames = await runner.frames("t");
    const named = frames
      .filter((frame) => frame.type === "tool_call")
      .map((frame) => (frame.data as { name: string }).name);
    assert.ok(named.includes("charge"), "the shown tool has its frames");
    assert.ok(!named.includes("audit"), `no tool_call frame names the hidden tool: ${named.join(", ")}`);
  });

  test("a declined call never runs and the model is told", async () => {
    const charged: unknown[] = [];
    const model = new MockLanguageModelV4({
      doGenerate: [toolCalls(["m1", "charge", { amount: 5 }]), text("Not charged.")],
    });
    const graph = createGraph<{ reply?: string }>("declined").node("agent", async (_state, ctx) => {
      const result = await generateText({
        model: durableModel(ctx, model),
        tools: withDurableTools(
          ctx,
          {
            charge: aiTool({
              description: "Charges",
              inputSchema: z.object({ amount: z.number() }),
              execute: async (input) => charged.push(input),
            }),
          },
          { charge: { approve: true } },
        ),
        prompt: "charge",
        stopWhen: stepCountIs(3),
        abortSignal: ctx.signal,
      });
      return { reply: result.text };
    });
    const runner = createRunner({ store: temp.store });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    const done = await runner.resume("t", {
      [paused.interrupts[0]?.id ?? ""]: { approved: false, reason: "too much" },
    });
    assert.equal(done.status, "completed");
    assert.deepEqual(charged, []);
    const prompt = JSON.stringify(model.doGenerateCalls[1]?.prompt);
    assert.match(prompt, /declined/);
    assert.equal(applyToolCards(await runner.frames("t")).get("agent:tool:0")?.status, "declined");
  });

  test("a policy that is not plain data is refused", () => {
    const graph = createGraph("bad-policy").node("n", (_state, ctx) => {
      withDurableTools(ctx, {}, { charge: { approve: "yes" } } as unknown as ToolPolicies);
    });
    return createRunner({ store: temp.store })
      .start(graph, {})
      .then((result) => {
        assert.equal(result.status, "failed");
        assert.equal(result.error?.code, "invalid_policy");
      });
  });
});
