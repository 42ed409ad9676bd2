/**
 * A node streams a model's answer with the AI SDK's `streamText` through the journal: the first pass
 * reaches a stock AG-UI client as `TEXT_MESSAGE_*` events, the resume replays the recorded stream
 * without asking the model again, and the run's state reaches the client as `STATE_SNAPSHOT` /
 * `STATE_DELTA`. The hosted model is the only mock: the AI SDK's own `MockLanguageModelV4`.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { HttpAgent } from "@ag-ui/client";
import type { LanguageModelV4StreamPart } from "@ai-sdk/provider";
import { createGraph, createRunner, type Runner } from "@tackle/durable";
import { durableModel, withDurableTools } from "@tackle/durable/ai-sdk";
import { type DurableServer, serveDurable } from "@tackle/durable/http";
import { tool as aiTool, simulateReadableStream, stepCountIs, streamText } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import { drive, verified } from "./ag-ui-client.ts";
import { type TempStore, tempSqliteStore } from "./helpers.ts";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

function turn(parts: LanguageModelV4StreamPart[]) {
  return { stream: simulateReadableStream({ chunks: parts, chunkDelayInMs: 1 }) };
}

function textParts(id: string, words: string[]): LanguageModelV4StreamPart[] {
  return [
    { type: "text-start", id },
    ...words.map((delta) => ({ type: "text-delta" as const, id, delta })),
    { type: "text-end", id },
  ];
}

const refunded: number[] = [];
let model: MockLanguageModelV4;

function freshModel(): MockLanguageModelV4 {
  return new MockLanguageModelV4({
    doStream: [
      turn([
        { type: "stream-start", warnings: [] },
        ...textParts("t1", ["Let me ", "refund ", "that."]),
        { type: "tool-call", toolCallId: "c1", toolName: "refund", input: JSON.stringify({ amount: 30 }) },
        { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage },
      ]),
      turn([
        { type: "stream-start", warnings: [] },
        ...textParts("t2", ["Refunded ", "30."]),
        { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage },
      ]),
    ],
  });
}

const chat = createGraph<{ prompt: string; reply?: string; turns?: number }>("chat").node(
  "agent",
  async (state, ctx) => {
    const result = streamText({
      model: durableModel(ctx, model),
      tools: withDurableTools(
        ctx,
        {
          refund: aiTool({
            description: "Refunds an amount",
            inputSchema: z.object({ amount: z.number() }),
            execute: async ({ amount }) => {
              refunded.push(amount);
              return { refunded: amount };
            },
          }),
        },
        { refund: { approve: true } },
      ),
      stopWhen: stepCountIs(3),
      abortSignal: ctx.signal,
      prompt: state.prompt,
    });
    const reply = await result.text; // the last turn's text
    return { reply, turns: (await result.steps).length };
  },
);

describe("a journaled model stream through AG-UI", () => {
  let temp: TempStore;
  let runner: Runner;
  let server: DurableServer;
  before(async () => {
    temp = tempSqliteStore();
    runner = createRunner({ store: temp.store, graphs: [chat], pollIntervalMs: 25 });
    server = await serveDurable({ runner });
  });
  after(async () => {
    await server.close();
    await runner.idle();
    await temp.cleanup();
  });

  test("first pass streams TEXT_MESSAGE_* and records; the resume replays it without the model; state flows", async () => {
    model = freshModel();
    const agent = new HttpAgent({
      url: `${server.url}/ag-ui/chat`,
      threadId: "stream-1",
      initialState: { prompt: "refund my order" },
    });
    const first = await verified(await drive(agent));
    assert.equal(model.doStreamCalls.length, 1);
    const texts = first.filter((event) => event.type.startsWith("TEXT_MESSAGE"));
    assert.deepEqual(
      texts.map((event) => event.type),
      [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
      ],
    );
    assert.equal(
      texts.map((event) => (event as unknown as { delta?: string }).delta ?? "").join(""),
      "Let me refund that.",
    );
    const snapshot = first.find((event) => event.type === "STATE_SNAPSHOT") as unknown as {
      snapshot: unknown;
    };
    assert.deepEqual(snapshot.snapshot, { prompt: "refund my order" });
    assert.equal((first.at(-1) as unknown as { outcome: { type: string } }).outcome.type, "interrupt");
    const [pending] = agent.pendingInterrupts;
    assert.ok(pending !== undefined);
    assert.deepEqual(refunded, []);

    const second = await verified(
      await drive(agent, {
        resume: [{ interruptId: pending.id, status: "resolved", payload: { approved: true } }],
      }),
    );
    // The first turn came from the journal: the model was asked once more, for the second turn only.
    assert.equal(model.doStreamCalls.length, 2);
    assert.deepEqual(refunded, [30]);
    const resumedText = second
      .filter((event) => event.type === "TEXT_MESSAGE_CONTENT")
      .map((event) => (event as unknown as { delta: string }).delta)
      .join("");
    assert.equal(resumedText, "Refunded 30.", "the replayed turn's text is not sent again");
    const delta = second.find((event) => event.type === "STATE_DELTA") as unknown as { delta: unknown[] };
    assert.deepEqual(delta.delta, [
      { op: "add", path: "/reply", value: "Refunded 30." },
      { op: "add", path: "/turns", value: 2 },
    ]);
    // The client's state is the run's state; its messages hold each text once.
    assert.deepEqual(agent.state, {
      prompt: "refund my order",
      reply: "Refunded 30.",
      turns: 2,
    });
    const assistantTexts = agent.messages
      .filter(
        (message) =>
          message.role === "assistant" && typeof message.content === "string" && message.content !== "",
      )
      .map((message) => message.content);
    assert.deepEqual(assistantTexts, ["Let me refund that.", "Refunded 30."]);
    const run = await runner.get<{ reply: string }>("stream-1");
    assert.equal(run?.state.reply, "Refunded 30.");
  });

  test("a replay of the finished node in a fresh runner calls no model and writes no text frames", async () => {
    const frames = await runner.frames("stream-1");
    const textFrames = frames.filter((frame) => frame.type.startsWith("text_"));
    // Two streamed turns: start, deltas and end of each, written once.
    assert.equal(textFrames.filter((frame) => frame.type === "text_start").length, 2);
    assert.equal(textFrames.filter((frame) => frame.type === "text_delta").length, 5);
    const journal = await temp.store.readJournal("stream-1");
    const streams = journal.filter((record) => record.name.startsWith("model-stream:"));
    assert.equal(streams.length, 2, "each streamed turn is one journaled step");
    assert.ok(streams.every((record) => record.state === "done"));
  });
});
