/**
 * The harness of the redaction properties (ADR 0126): one tool call through the AI SDK integration
 * (`withDurableTools` + `durableModel`, the AI SDK's MockLanguageModelV4 emitting the call) or the
 * LangChain one, under a random case's policy, and the oracle of what is shown and what the tool got.
 */
import assert from "node:assert/strict";
import type {
  LanguageModelV4CallOptions,
  LanguageModelV4GenerateResult,
  LanguageModelV4StreamPart,
} from "@ai-sdk/provider";
import { tool as langchainTool } from "@langchain/core/tools";
import { createGraph, type Frame, type NodeContext, type ToolPolicies } from "@tackle/durable";
import { durableModel, withDurableTools } from "@tackle/durable/ai-sdk";
import { AgUiTranslator } from "@tackle/durable/http";
import { withDurableTools as withDurableLangChainTools } from "@tackle/durable/langchain";
import { seededRandom } from "@tackle/test-support";
import {
  tool as aiTool,
  generateText,
  jsonSchema,
  simulateReadableStream,
  stepCountIs,
  streamText,
} from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { expectedMask, marker, type RedactionCase, randomCase } from "./redaction-cases.ts";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** The cases a run reads by `state.seed`, and what each tool's handler received. */
const cases = new Map<number, RedactionCase>();
const received = new Map<number, unknown[]>();

const answered = (options: LanguageModelV4CallOptions) =>
  options.prompt.some((message) => message.role === "tool");

/**
 * The model calls the tool once with the case's input, then answers in text once the tool answered.
 * An odd seed streams, the call's arguments going out as `tool-input-delta` parts first, as a provider's do.
 */
function modelFor(c: RedactionCase): MockLanguageModelV4 {
  const args = JSON.stringify(c.input);
  return new MockLanguageModelV4({
    doGenerate: async (options): Promise<LanguageModelV4GenerateResult> => ({
      content: answered(options)
        ? [{ type: "text", text: "done" }]
        : [{ type: "tool-call", toolCallId: "m1", toolName: "act", input: args }],
      finishReason: answered(options)
        ? { unified: "stop", raw: "stop" }
        : { unified: "tool-calls", raw: "tool_calls" },
      usage,
      warnings: [],
    }),
    doStream: async (options) => {
      const parts: LanguageModelV4StreamPart[] = answered(options)
        ? [
            { type: "text-start", id: "t" },
            { type: "text-delta", id: "t", delta: "done" },
            { type: "text-end", id: "t" },
            { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage },
          ]
        : [
            { type: "tool-input-start", id: "m1", toolName: "act" },
            { type: "tool-input-delta", id: "m1", delta: args },
            { type: "tool-input-end", id: "m1" },
            { type: "tool-call", toolCallId: "m1", toolName: "act", input: args },
            { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage },
          ];
      return {
        stream: simulateReadableStream({
          chunks: [{ type: "stream-start", warnings: [] }, ...parts],
          chunkDelayInMs: null,
        }),
      };
    },
  });
}

/** Seeds whose tool hangs in its first call, as if its process died there: each told when it hangs. */
const dying = new Map<number, () => void>();

async function act(c: RedactionCase, input: unknown): Promise<unknown> {
  received.get(c.seed)?.push(structuredClone(input));
  const died = dying.get(c.seed);
  if (died !== undefined) {
    dying.delete(c.seed);
    died();
    return new Promise<never>(() => {});
  }
  if (c.outcome === "fails") throw new Error("the tool failed");
  return input;
}

async function agent(state: { seed: number }, ctx: NodeContext): Promise<{ reply: string }> {
  const c = cases.get(state.seed) as RedactionCase;
  const tools = {
    act: aiTool({
      description: "Acts on its input",
      inputSchema: jsonSchema<Record<string, unknown>>({ type: "object" }),
      execute: (input) => act(c, input),
    }),
  };
  const options = {
    model: durableModel(ctx, modelFor(c)),
    tools: withDurableTools(ctx, tools, policyOf(c)),
    prompt: "act",
    stopWhen: stepCountIs(3),
    abortSignal: ctx.signal,
  };
  if (c.seed % 2 === 1) return { reply: await streamText(options).text };
  return { reply: (await generateText(options)).text };
}

/** The same call through the LangChain integration, which passes `__proto__` keys on. */
async function langChainAgent(state: { seed: number }, ctx: NodeContext): Promise<{ reply: string }> {
  const c = cases.get(state.seed) as RedactionCase;
  const original = langchainTool((input: unknown) => act(c, input), {
    name: "act",
    description: "Acts on its input",
    schema: { type: "object" },
  });
  const [wrapped] = withDurableLangChainTools(ctx, [original], policyOf(c));
  try {
    // What the graph keeps of the result is its own business: only the outcome here.
    await wrapped?.invoke(c.input);
    return { reply: "done" };
  } catch (error) {
    return { reply: (error as Error).message };
  }
}

export const graph = createGraph<{ seed: number; reply?: string }>("redaction").node("agent", agent);
export const langChainGraph = createGraph<{ seed: number; reply?: string }>("redaction-lc").node(
  "agent",
  langChainAgent,
);

export function newCase(seed: number, withProto = false): RedactionCase {
  const c = randomCase(seededRandom(seed), seed, withProto);
  cases.set(seed, c);
  received.set(seed, []);
  return c;
}

/** Drops a checked case. */
export function forget(seed: number): void {
  cases.delete(seed);
  received.delete(seed);
  dying.delete(seed);
}

/**
 * Makes the case's tool hang in its first call, its driver dead there (its process would be gone):
 * resolves once the call is in flight, the journal holding its start.
 */
export function dieInTool(seed: number): Promise<void> {
  return new Promise((resolve) => dying.set(seed, resolve));
}

/** The case's policy: some failing calls retry once (a `running` frame with `retrying`), some hide. */
function policyOf(c: RedactionCase): ToolPolicies {
  return {
    act: {
      redact: c.paths,
      approve: c.approve,
      ...(c.seed % 4 === 0 ? { retry: { attempts: 2, backoff: { initialMs: 1 } } } : {}),
      ...(c.seed % 7 === 0 ? { show: false } : {}),
    },
  };
}

/** What the cases covered, printed after each test. */
export function tally() {
  const totals = {
    cases: 0,
    secrets: 0,
    masked: 0,
    approvals: 0,
    succeeded: 0,
    failed: 0,
    refused: 0,
    edits: 0,
    editedSecrets: 0,
    restarts: 0,
    takeovers: 0,
    agUiResumes: 0,
  };
  const add = (c: RedactionCase) => {
    totals.cases += 1;
    totals.secrets += JSON.stringify(c.input).split(marker).length - 1;
    totals.masked += JSON.stringify(expectedMask(c.input, c.paths)).split("[redacted]").length - 1;
    if (c.approve) totals.approvals += 1;
    if (c.edit !== undefined) {
      totals.edits += 1;
      totals.editedSecrets += JSON.stringify(c.edit).split(`${marker}${c.seed}e`).length - 1;
    }
    totals[({ succeeds: "succeeded", fails: "failed", refused: "refused" } as const)[c.outcome]] += 1;
  };
  return { totals, add };
}

export const answerOf = (c: RedactionCase) =>
  c.outcome === "refused"
    ? { approved: false, reason: "not today" }
    : { approved: true, ...(c.edit === undefined ? {} : { editedArgs: c.edit }) };

/**
 * (c) on the approval and on every tool card; (a) on what the handler got. With an edit, the approval
 * and a card awaiting it show the model's arguments masked, every later card the edited ones masked the
 * same way (a shown value as edited), and the tool gets the edited real values. `died`: the driver died
 * in the call and the next one ran it again, with the same (real, edited) values.
 */
export function checkShown(
  c: RedactionCase,
  frames: readonly Frame[],
  requests: readonly unknown[],
  died = false,
): void {
  const asked = expectedMask(c.input, c.paths);
  const real = c.edit ?? c.input;
  const shown = expectedMask(real, c.paths);
  const context = `seed ${c.seed}: paths ${JSON.stringify(c.paths)} input ${JSON.stringify(c.input)} edit ${JSON.stringify(c.edit)}`;
  for (const request of requests)
    assert.deepStrictEqual((request as { params: unknown }).params, asked, context);
  const cards = frames
    .filter((frame) => frame.type === "tool_call")
    .map((frame) => frame.data as Record<string, unknown>);
  if (c.seed % 7 === 0) assert.deepStrictEqual(cards, [], context);
  for (const card of cards) {
    assert.deepStrictEqual(card.params, card.status === "awaiting_approval" ? asked : shown, context);
    if (card.status === "completed") assert.deepStrictEqual(card.result, shown, context);
  }
  if (c.seed % 7 !== 0) {
    const last = cards.at(-1)?.status;
    assert.equal(last, { succeeds: "completed", fails: "error", refused: "declined" }[c.outcome], context);
  }
  // A driver that died in the call: the next one runs it again as the next attempt (the last, when it retries).
  const tries = died || (c.outcome === "fails" && c.seed % 4 === 0) ? 2 : 1;
  if (tries === 2 && !died && c.seed % 7 !== 0)
    assert.ok(
      cards.some((card) => card.retrying !== undefined),
      context,
    );
  const calls = c.outcome === "refused" ? [] : Array.from({ length: tries }, () => real);
  assert.deepStrictEqual(received.get(c.seed), calls, context);
}

export function translated(frames: readonly Frame[], threadId: string, runId: string): unknown[] {
  const translator = new AgUiTranslator({ threadId, runId });
  return frames.flatMap((frame) => translator.translate(frame));
}
