/**
 * A memory service that accepts connections and never answers must not stall the model call: the
 * model is called within the context deadline (default 300 ms) plus 50 ms, with the AI SDK and with
 * the OpenAI wrapper; the call's own abort signal cuts the wait shorter; every call reports the
 * failure (the hook, a span event, a log line); the capture (to the same hung service) never delays
 * the answer.
 */
import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import { trace } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { generateText, streamText } from "ai";
import OpenAI from "openai";
import { withMemory } from "../src/ai-sdk/index.ts";
import { DEFAULT_CONTEXT_TIMEOUT_MS } from "../src/middleware/create-memory-middleware-core.ts";
import type { MemoryMiddlewareError } from "../src/middleware/memory-middleware-error.ts";
import { createOpenAIMiddleware } from "../src/openai/index.ts";
import { scriptedModel } from "./support/scripted-model.ts";
import { type OpenAIWireServer, startOpenAIWireServer } from "./support/start-openai-wire-server.ts";

/** The slack the model call may take beyond the deadline. */
const SLACK_MS = 50;
/**
 * On a loaded machine a timer can fire late whatever the code does: each call must stay within this
 * bound, and the best of the repeated calls within the deadline + `SLACK_MS`.
 */
const LOADED_MACHINE_MS = 250;

let silent: Server;
const sockets = new Set<Socket>();
let silentUrl: string;
let wire: OpenAIWireServer;
let wireArrivals: number[] = [];
const exporter = new InMemorySpanExporter();

before(async () => {
  // Accepts every connection, reads whatever is sent, answers nothing, never closes.
  silent = createServer((socket) => {
    sockets.add(socket);
    socket.on("data", () => {});
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  silentUrl = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
  wire = await startOpenAIWireServer(
    () => {
      wireArrivals.push(performance.now());
      return "answered";
    },
    { jitterMs: 0 },
  );
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
  );
});

after(async () => {
  trace.disable();
  for (const socket of sockets) socket.destroy();
  await new Promise<void>((resolve) => silent.close(() => resolve()));
  await wire.close();
});

/** Every wait within the budget + the loaded-machine bound; the best one within the budget + 50 ms. */
function assertWithin(waits: readonly number[], budgetMs: number): void {
  for (const waited of waits) {
    assert.ok(waited <= budgetMs + LOADED_MACHINE_MS, `the model was called after ${waited.toFixed(0)} ms`);
  }
  const best = Math.min(...waits);
  assert.ok(best <= budgetMs + SLACK_MS, `the model was called after ${best.toFixed(0)} ms at best`);
}

function recorder() {
  const errors: MemoryMiddlewareError[] = [];
  const lines: string[] = [];
  return {
    errors,
    lines,
    options: {
      apiUrl: silentUrl,
      apiKey: "any",
      clientOptions: { allowPrivateNetwork: true },
      onError: (error: MemoryMiddlewareError) => errors.push(error),
      logger: { warn: (message: string) => lines.push(message) },
    },
  };
}

/** A model that notes when it was called. */
function timedModel() {
  const calledAt: number[] = [];
  const model = scriptedModel(() => {
    calledAt.push(performance.now());
    return "answered";
  });
  return { model, calledAt };
}

describe("a memory service that accepts and never answers", () => {
  it("withMemory (default options): the model is called within 300 ms + 50 ms, on every call, and each failure is reported three ways", async () => {
    assert.equal(DEFAULT_CONTEXT_TIMEOUT_MS, 300);
    const { errors, lines, options } = recorder();
    const { model, calledAt } = timedModel();
    exporter.reset();
    const wrapped = withMemory(model, options);
    const waits: number[] = [];
    for (let call = 0; call < 3; call += 1) {
      const started = performance.now();
      const result = await generateText({
        model: wrapped,
        prompt: `Question number ${call}?`,
        providerOptions: { memory: { userId: "alice", sessionId: `stall-${call}` } },
      });
      const answeredAt = performance.now();
      assert.equal(result.text, "answered");
      const waited = calledAt[call]! - started;
      assert.ok(waited >= 250, `the deadline was not waited for (${waited.toFixed(0)} ms): not a stall test`);
      assert.ok(waited <= 300 + LOADED_MACHINE_MS, `the model was called after ${waited.toFixed(0)} ms`);
      // The capture goes to the same hung service: had the answer waited for it, this would be seconds.
      assert.ok(answeredAt - started <= 300 + LOADED_MACHINE_MS + 50, "the capture delayed the answer");
      waits.push(waited);
    }
    assertWithin(waits, 300);
    // Three context failures, each reported: the hook, a log line, a span event.
    const contextErrors = errors.filter((error) => error.code === "memory_context_failed");
    assert.equal(contextErrors.length, 3);
    assert.match(contextErrors[0]!.message, /no answer within 300 ms/);
    assert.equal(lines.filter((line) => /memory context unavailable/.test(line)).length, 3);
    const events = exporter
      .getFinishedSpans()
      .flatMap((span) => span.events)
      .filter((event) => event.name === "memory_context_failed");
    assert.equal(events.length, 3);
  });

  it("streamText: the stream starts within the deadline", async () => {
    const { options } = recorder();
    const { model, calledAt } = timedModel();
    const wrapped = withMemory(model, options);
    const waits: number[] = [];
    for (let call = 0; call < 2; call += 1) {
      const started = performance.now();
      const result = streamText({
        model: wrapped,
        prompt: `Stream it ${call}?`,
        providerOptions: { memory: { userId: "alice" } },
      });
      assert.equal(await result.text, "answered");
      waits.push(calledAt[call]! - started);
    }
    assertWithin(waits, 300);
  });

  it("the deadline is configurable", async () => {
    const { errors, options } = recorder();
    const { model, calledAt } = timedModel();
    const wrapped = withMemory(model, { ...options, contextTimeoutMs: 100 });
    const waits: number[] = [];
    for (let call = 0; call < 2; call += 1) {
      const started = performance.now();
      await generateText({
        model: wrapped,
        prompt: `Quickly ${call}?`,
        providerOptions: { memory: { userId: "alice" } },
      });
      waits.push(calledAt[call]! - started);
    }
    assert.ok(Math.min(...waits) >= 80, "the configured deadline was not waited for");
    assertWithin(waits, 100);
    assert.match(errors[0]!.message, /no answer within 100 ms/);
  });

  it("the call's abort signal ends the wait before the deadline", async () => {
    const { errors, options } = recorder();
    const { model } = timedModel();
    const wrapped = withMemory(model, { ...options, contextTimeoutMs: 5000 });
    const waits: number[] = [];
    for (let call = 0; call < 2; call += 1) {
      const started = performance.now();
      await generateText({
        model: wrapped,
        prompt: `Abort me ${call}?`,
        abortSignal: AbortSignal.timeout(100),
        providerOptions: { memory: { userId: "alice" } },
      }).catch(() => undefined); // the model may refuse an aborted call; either way the wait ended
      waits.push(performance.now() - started);
    }
    assertWithin(waits, 100);
    assert.equal(errors[0]?.code, "memory_context_failed");
    assert.match(errors[0]!.message, /aborted/);
  });

  it("the OpenAI wrapper: the request reaches the model within 300 ms + 50 ms, for Chat Completions and Responses", async () => {
    const { errors, lines, options } = recorder();
    const client = createOpenAIMiddleware(
      new OpenAI({ apiKey: "sk-test", baseURL: wire.baseURL, maxRetries: 0 }),
      { ...options, userId: "alice" },
    );
    wireArrivals = [];
    const waits: number[] = [];
    for (let call = 0; call < 2; call += 1) {
      const started = performance.now();
      const completion = await client.chat.completions.create({
        model: "scripted",
        messages: [{ role: "user", content: `Hello ${call}?` }],
      });
      assert.equal(completion.choices[0]!.message.content, "answered");
      waits.push(wireArrivals.at(-1)! - started);
    }
    assertWithin(waits, 300);
    const responseWaits: number[] = [];
    for (let call = 0; call < 2; call += 1) {
      const started = performance.now();
      await client.responses.create({ model: "scripted", input: `And the Responses API ${call}?` });
      responseWaits.push(wireArrivals.at(-1)! - started);
    }
    assertWithin(responseWaits, 300);
    assert.equal(errors.filter((error) => error.code === "memory_context_failed").length, 4);
    assert.equal(lines.filter((line) => /memory context unavailable/.test(line)).length, 4);
  });

  it("the OpenAI wrapper honours the request's abort signal", async () => {
    const { errors, options } = recorder();
    const client = createOpenAIMiddleware(
      new OpenAI({ apiKey: "sk-test", baseURL: wire.baseURL, maxRetries: 0 }),
      { ...options, userId: "alice", contextTimeoutMs: 5000 },
    );
    const waits: number[] = [];
    for (let call = 0; call < 2; call += 1) {
      const started = performance.now();
      await client.chat.completions
        .create(
          { model: "scripted", messages: [{ role: "user", content: `Abort ${call}?` }] },
          { signal: AbortSignal.timeout(100) },
        )
        .catch(() => undefined);
      waits.push(performance.now() - started);
    }
    assertWithin(waits, 100);
    assert.match(errors[0]!.message, /aborted/);
  });
});
