/**
 * Redaction as a property (ADR 0126): no value at a redacted path reaches what a UI or an approver reads, and the
 * tool still gets the real values. Thousands of random cases drive one tool call through the AI SDK
 * integration (`withDurableTools` + `durableModel`, the AI SDK's MockLanguageModelV4 emitting the call):
 * a random input (nested objects and arrays, keys `constructor`, `toString`, `length`, keys holding dots
 * or `*`, scalars at a redacted path, paths to nowhere, wildcards), random `redact` paths, with and
 * without `approve`, the tool succeeding, failing (a harmless message) or refused (approval declined).
 * Every value at a redacted path carries a unique secret marker. The oracle:
 *
 * - (a) the tool's handler receives exactly the real input, once, or never when refused;
 * - (b) no marker appears in anything a UI or an approver reads: every frame, the interrupts'
 *   requests, the run, its history, the AG-UI translation; over HTTP also the `GET /runs/:id`,
 *   `/history` answers and the frames and AG-UI SSE streams;
 * - (c) the shown arguments (tool cards, the approval's `params`) and the shown result (the tool
 *   returns its input) are the oracle's mask, written apart from `redact`: a value at a path masked
 *   whole as `"[redacted]"`, whatever its type, nothing else changed, a missing path left missing;
 * - (d) an approval answered after a runner restart on the SQLite file hands the tool the real values.
 *
 * By design, one stored table DOES hold the real values: `durable_journal` (the model step's answer with
 * the tool call's arguments, the tool step's result, an approver's edited arguments) must, to resume a
 * run without asking the model again. `durable_frames` and `durable_runs` (its interrupts' requests, its
 * state) hold only what was shown — as long as the graph keeps no redacted value in its own state. `__proto__` keys go through the LangChain integration and `redact`
 * itself: the AI SDK's JSON parser refuses a tool call that carries one. The approval's fingerprint is of
 * the arguments as shown (ADR 0126), so it tells nothing of a redacted value either.
 *
 * `TACKLE_PROPERTY_ROUNDS` sets the number of cases (default 2,000 on the in-memory store, a tenth over
 * HTTP on a SQLite file); `TACKLE_PROPERTY_SEED` replays one.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type {
  LanguageModelV4CallOptions,
  LanguageModelV4GenerateResult,
  LanguageModelV4StreamPart,
} from "@ai-sdk/provider";
import { tool as langchainTool } from "@langchain/core/tools";
import {
  createGraph,
  createMemoryStore,
  createRunner,
  type Frame,
  type NodeContext,
  type Runner,
  redact,
  type ToolPolicies,
} from "@tackle/durable";
import { durableModel, withDurableTools } from "@tackle/durable/ai-sdk";
import { AgUiTranslator, type DurableServer, serveDurable } from "@tackle/durable/http";
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
import { type TempStore, tempSqliteStore } from "./helpers.ts";
import { rounds, seeds } from "./property-programs.ts";
import { assertNoMarker, expectedMask, marker, type RedactionCase, randomCase } from "./redaction-cases.ts";

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

async function act(c: RedactionCase, input: unknown): Promise<unknown> {
  received.get(c.seed)?.push(structuredClone(input));
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

const graph = createGraph<{ seed: number; reply?: string }>("redaction").node("agent", agent);
const langChainGraph = createGraph<{ seed: number; reply?: string }>("redaction-lc").node(
  "agent",
  langChainAgent,
);

function newCase(seed: number, withProto = false): RedactionCase {
  const c = randomCase(seededRandom(seed), seed, withProto);
  cases.set(seed, c);
  received.set(seed, []);
  return c;
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
function tally() {
  const totals = {
    cases: 0,
    secrets: 0,
    masked: 0,
    approvals: 0,
    succeeded: 0,
    failed: 0,
    refused: 0,
    restarts: 0,
  };
  const add = (c: RedactionCase) => {
    totals.cases += 1;
    totals.secrets += JSON.stringify(c.input).split(marker).length - 1;
    totals.masked += JSON.stringify(expectedMask(c.input, c.paths)).split("[redacted]").length - 1;
    if (c.approve) totals.approvals += 1;
    totals[({ succeeds: "succeeded", fails: "failed", refused: "refused" } as const)[c.outcome]] += 1;
  };
  return { totals, add };
}

const answerOf = (c: RedactionCase) =>
  c.outcome === "refused" ? { approved: false, reason: "not today" } : { approved: true };

/** (c) on the approval and on every tool card; (a) on what the handler got. */
function checkShown(c: RedactionCase, frames: readonly Frame[], requests: readonly unknown[]): void {
  const shown = expectedMask(c.input, c.paths);
  const context = `seed ${c.seed}: paths ${JSON.stringify(c.paths)} input ${JSON.stringify(c.input)}`;
  for (const request of requests)
    assert.deepStrictEqual((request as { params: unknown }).params, shown, context);
  const cards = frames
    .filter((frame) => frame.type === "tool_call")
    .map((frame) => frame.data as Record<string, unknown>);
  if (c.seed % 7 === 0) assert.deepStrictEqual(cards, [], context);
  for (const card of cards) {
    assert.deepStrictEqual(card.params, shown, context);
    if (card.status === "completed") assert.deepStrictEqual(card.result, shown, context);
  }
  if (c.seed % 7 !== 0) {
    const last = cards.at(-1)?.status;
    assert.equal(last, { succeeds: "completed", fails: "error", refused: "declined" }[c.outcome], context);
  }
  const tries = c.outcome === "fails" && c.seed % 4 === 0 ? 2 : 1;
  if (tries === 2 && c.seed % 7 !== 0)
    assert.ok(
      cards.some((card) => card.retrying !== undefined),
      context,
    );
  const calls = c.outcome === "refused" ? [] : Array.from({ length: tries }, () => c.input);
  assert.deepStrictEqual(received.get(c.seed), calls, context);
}

function translated(frames: readonly Frame[], threadId: string, runId: string): unknown[] {
  const translator = new AgUiTranslator({ threadId, runId });
  return frames.flatMap((frame) => translator.translate(frame));
}

describe("redaction as a property", () => {
  const inMemory = async (chosen: typeof graph, offset: number, withProto: boolean) => {
    const { totals, add } = tally();
    const runner = createRunner({ store: createMemoryStore(), graphs: [chosen] });
    try {
      for (const seed of seeds(rounds(2000), offset)) {
        const c = newCase(seed, withProto);
        const threadId = `m${seed}`;
        const requests: unknown[] = [];
        let run = await runner.start(chosen, { seed }, { threadId });
        if (c.approve) {
          assert.equal(run.status, "paused", `seed ${seed}`);
          assertNoMarker(run, "the paused run", c);
          requests.push(...run.interrupts.map((open) => open.request));
          run = await runner.resume(threadId, { [run.interrupts[0]?.id ?? ""]: answerOf(c) });
        }
        assert.equal(run.status, "completed", `seed ${seed}: ${JSON.stringify(run.error)}`);
        const frames = await runner.frames(threadId);
        assertNoMarker(frames, "the frames", c);
        assertNoMarker(run, "the run", c);
        assertNoMarker(await runner.history(threadId), "the history", c);
        assertNoMarker(translated(frames, threadId, run.runId), "the AG-UI events", c);
        checkShown(c, frames, requests);
        add(c);
        cases.delete(seed);
      }
      console.log(`# ${chosen.name}: ${JSON.stringify(totals)}`);
    } finally {
      await runner.close();
    }
  };

  it("no redacted value reaches a frame, an approver, the run or AG-UI; the tool gets the real input (AI SDK, in-memory store)", () =>
    inMemory(graph, 1, false));

  it("the same through the LangChain integration, `__proto__` keys included", () =>
    inMemory(langChainGraph, 300_000, true));

  it("`__proto__`, inherited names and dotted keys mask as the oracle says, on `redact` itself", () => {
    for (const seed of seeds(rounds(2000), 100_000)) {
      const c = randomCase(seededRandom(seed), seed, true);
      const shown = redact(c.input, c.paths);
      assertNoMarker(shown, "redact", c);
      assert.deepStrictEqual(shown, expectedMask(c.input, c.paths), `seed ${seed}: ${JSON.stringify(c)}`);
    }
  });
});

describe("redaction as a property, over HTTP on a SQLite file", () => {
  let temp: TempStore;
  let runner: Runner;
  let server: DurableServer;
  const open = async (fresh: boolean) => {
    runner = createRunner({ store: fresh ? temp.store : temp.reopen(), graphs: [graph], pollIntervalMs: 20 });
    server = await serveDurable({ runner });
  };
  before(async () => {
    temp = tempSqliteStore();
    await open(true);
  });
  after(async () => {
    await server.close();
    await runner.close();
    await temp.cleanup();
  });

  const getJson = async (path: string) => {
    const response = await fetch(`${server.url}${path}`);
    const text = await response.text();
    assert.equal(response.status, 200, text);
    return text;
  };
  const post = async (path: string, body: unknown) => {
    const response = await fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    assert.ok(response.status < 300, text);
  };
  /** Polls the run until it leaves `running`. */
  const settled = async (threadId: string) => {
    for (;;) {
      const run = JSON.parse(await getJson(`/runs/${threadId}`)) as { status: string; runId: string };
      if (run.status !== "running")
        return run as { status: string; runId: string; interrupts: { id: string; request: unknown }[] };
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  };
  /** The raw SSE text of a stream, read until `done` says the last wanted event came. */
  const sse = async (path: string, done: (text: string) => boolean) => {
    const controller = new AbortController();
    const response = await fetch(`${server.url}${path}`, { signal: controller.signal });
    assert.equal(response.status, 200);
    const decoder = new TextDecoder();
    let text = "";
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        text += decoder.decode(chunk, { stream: true });
        if (done(text)) break;
      }
    } finally {
      controller.abort();
    }
    return text;
  };

  it("no redacted value reaches the run, history, frames or AG-UI answers; a resume after a restart hands the tool the real input", async () => {
    const { totals, add } = tally();
    for (const seed of seeds(rounds(2000) / 10, 200_000)) {
      const c = newCase(seed);
      const threadId = `h${seed}`;
      await post("/runs", { graph: "redaction", threadId, input: { seed } });
      let run = await settled(threadId);
      const requests: unknown[] = [];
      if (c.approve) {
        assert.equal(run.status, "paused", `seed ${seed}`);
        assertNoMarker(run, "GET /runs/:id (paused)", c);
        requests.push(...run.interrupts.map((item) => item.request));
        if (seed % 3 === 0) {
          // (d) the runner restarts on the same file before the approval is answered.
          await server.close();
          await runner.close();
          await open(false);
          totals.restarts += 1;
        }
        await post(`/runs/${threadId}/resume`, { answers: { [run.interrupts[0]?.id ?? ""]: answerOf(c) } });
        run = await settled(threadId);
      }
      assert.equal(run.status, "completed", `seed ${seed}: ${JSON.stringify(run)}`);
      assertNoMarker(await getJson(`/runs/${threadId}`), "GET /runs/:id", c);
      assertNoMarker(await getJson(`/runs/${threadId}/history`), "GET /runs/:id/history", c);
      const frames = await runner.frames(threadId);
      const last = frames.at(-1)?.seq;
      assertNoMarker(
        await sse(`/runs/${threadId}/frames`, (text) => text.includes(`id: ${last}\n`)),
        "the frames stream",
        c,
      );
      const ends = translated(frames, threadId, run.runId).filter(
        (event) => (event as { type: string }).type === "RUN_FINISHED",
      ).length;
      const agUi = await sse(
        `/runs/${threadId}/frames?format=ag-ui`,
        (text) => text.split('"type":"RUN_FINISHED"').length - 1 >= ends,
      );
      assertNoMarker(agUi, "the AG-UI stream", c);
      checkShown(c, frames, requests);
      add(c);
      cases.delete(seed);
    }
    console.log(`# http: ${JSON.stringify(totals)}`);
  });
});
