/**
 * A memory service that accepts connections and never answers must not stall the model call: the
 * model is called within the context deadline (default 300 ms) plus 50 ms, with the AI SDK and with
 * the OpenAI wrapper; the call's own abort signal cuts the wait shorter; every call reports the
 * failure (the hook, a span event, a log line); the capture (to the same hung service) never delays
 * the answer.
 *
 * Each wait is measured from the moment the memory layer is handed the call (an outer middleware
 * notes it; for the OpenAI wrapper, the call itself) to the moment it hands the call to the model
 * (the model's own call; for OpenAI, the SDK's `create`): what the AI SDK or the OpenAI SDK do before
 * and after, slow on a first call on a busy machine, is not the memory layer's delay. And a timer of
 * the deadline's length is armed at that same moment: on a busy machine it fires late exactly as the
 * deadline's own timer does, so the time from its firing to the model call is the memory layer's own.
 * What runs after that firing still waits for a core: each bound adds the timer lag measured just
 * after the calls (`measuredLagMs`).
 */
import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import type { LanguageModelV4 } from "@ai-sdk/provider";
import { trace } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { measuredLagMs } from "@tackle/test-support";
import { generateText, streamText, wrapLanguageModel } from "ai";
import OpenAI from "openai";
import { withMemory } from "../src/ai-sdk/index.ts";
import { DEFAULT_CONTEXT_TIMEOUT_MS } from "../src/middleware/create-memory-middleware-core.ts";
import type { MemoryMiddlewareError } from "../src/middleware/memory-middleware-error.ts";
import { createOpenAIMiddleware } from "../src/openai/index.ts";
import { scriptedModel } from "./support/scripted-model.ts";
import { type OpenAIWireServer, startOpenAIWireServer } from "./support/start-openai-wire-server.ts";

/** The slack the model call may take beyond the deadline, plus the machine's measured timer lag. */
const SLACK_MS = 50;
/**
 * On a loaded machine a timer can fire late whatever the code does: each call must stay within the
 * deadline + this bound + the measured timer lag, and the best of the repeated calls within
 * `SLACK_MS` (+ the lag) of the deadline's time.
 */
const LOADED_MACHINE_MS = 250;

let silent: Server;
const sockets = new Set<Socket>();
let silentUrl: string;
let wire: OpenAIWireServer;
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
  wire = await startOpenAIWireServer(() => "answered", { jitterMs: 0 });
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

/**
 * One wait of the memory layer, from `from` (it was handed the call), with a timer of the deadline's
 * length armed then (`onFire` runs when it fires: an abort, say). `end(at)` gives how long the wait
 * was, and how long past the timer's firing it ended (0 if before).
 */
function startWait(deadlineMs: number, onFire: () => void = () => {}) {
  const from = performance.now();
  let firedAt = Number.POSITIVE_INFINITY;
  setTimeout(() => {
    firedAt = performance.now();
    onFire();
  }, deadlineMs);
  return {
    from,
    end: (at: number) => ({ waited: at - from, pastDeadline: Math.max(0, at - firedAt) }),
  };
}

type Wait = ReturnType<ReturnType<typeof startWait>["end"]>;

/**
 * Every wait within the deadline + the loaded-machine bound; the best one ended within 50 ms of the
 * deadline's time (the firing of a timer of its length armed at the same moment). Both bounds add
 * the timer lag measured now, just after the calls.
 */
async function assertWithin(waits: readonly Wait[], deadlineMs: number): Promise<void> {
  const lagMs = await measuredLagMs();
  const lag = `(timer lag ${lagMs} ms)`;
  for (const { waited } of waits) {
    assert.ok(
      waited <= deadlineMs + LOADED_MACHINE_MS + lagMs,
      `the model was called after ${waited.toFixed(0)} ms ${lag}`,
    );
  }
  const best = Math.min(...waits.map((wait) => wait.pastDeadline));
  assert.ok(
    best <= SLACK_MS + lagMs,
    `the model was called ${best.toFixed(0)} ms after the deadline had come, at best (waits: ${waits
      .map((wait) => wait.waited.toFixed(0))
      .join(", ")} ms) ${lag}`,
  );
}

function recorder() {
  const errors: MemoryMiddlewareError[] = [];
  /** When each failure was reported: the memory layer gave up waiting. */
  const reportedAt: number[] = [];
  const lines: string[] = [];
  return {
    errors,
    reportedAt,
    lines,
    options: {
      apiUrl: silentUrl,
      apiKey: "any",
      clientOptions: { allowPrivateNetwork: true },
      onError: (error: MemoryMiddlewareError) => {
        reportedAt.push(performance.now());
        errors.push(error);
      },
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

/**
 * `wrapped` behind an outer middleware that starts a wait (`startWait`) when the memory layer is
 * handed each call.
 */
function entering(wrapped: LanguageModelV4, deadlineMs: number, onFire?: () => void) {
  const entered: ReturnType<typeof startWait>[] = [];
  const model = wrapLanguageModel({
    model: wrapped,
    middleware: {
      specificationVersion: "v4",
      transformParams: async ({ params }) => {
        entered.push(startWait(deadlineMs, onFire));
        return params;
      },
    },
  });
  return { model, entered };
}

describe("a memory service that accepts and never answers: withMemory", () => {
  it("withMemory (default options): the model is called within 300 ms + 50 ms, on every call, and each failure is reported three ways", async () => {
    assert.equal(DEFAULT_CONTEXT_TIMEOUT_MS, 300);
    const { errors, lines, options } = recorder();
    const { model, calledAt } = timedModel();
    exporter.reset();
    const { model: wrapped, entered } = entering(withMemory(model, options), 300);
    const waits: Wait[] = [];
    for (let call = 0; call < 3; call += 1) {
      const result = await generateText({
        model: wrapped,
        prompt: `Question number ${call}?`,
        providerOptions: { memory: { userId: "alice", sessionId: `stall-${call}` } },
      });
      const answeredAt = performance.now();
      assert.equal(result.text, "answered");
      const wait = entered[call]!.end(calledAt[call]!);
      const { waited } = wait;
      assert.ok(waited >= 250, `the deadline was not waited for (${waited.toFixed(0)} ms): not a stall test`);
      // The capture goes to the same hung service: had the answer waited for it, this would be seconds.
      const held = answeredAt - calledAt[call]!;
      if (held > LOADED_MACHINE_MS) {
        const lagMs = await measuredLagMs();
        assert.ok(
          held <= LOADED_MACHINE_MS + lagMs,
          `the capture delayed the answer by ${held.toFixed(0)} ms (timer lag ${lagMs} ms)`,
        );
      }
      waits.push(wait);
    }
    await assertWithin(waits, 300);
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
    const { model: wrapped, entered } = entering(withMemory(model, options), 300);
    const waits: Wait[] = [];
    for (let call = 0; call < 2; call += 1) {
      const result = streamText({
        model: wrapped,
        prompt: `Stream it ${call}?`,
        providerOptions: { memory: { userId: "alice" } },
      });
      assert.equal(await result.text, "answered");
      waits.push(entered[call]!.end(calledAt[call]!));
    }
    await assertWithin(waits, 300);
  });

  it("the deadline is configurable", async () => {
    const { errors, options } = recorder();
    const { model, calledAt } = timedModel();
    const { model: wrapped, entered } = entering(
      withMemory(model, { ...options, contextTimeoutMs: 100 }),
      100,
    );
    const waits: Wait[] = [];
    for (let call = 0; call < 2; call += 1) {
      await generateText({
        model: wrapped,
        prompt: `Quickly ${call}?`,
        providerOptions: { memory: { userId: "alice" } },
      });
      waits.push(entered[call]!.end(calledAt[call]!));
    }
    assert.ok(
      Math.min(...waits.map((wait) => wait.waited)) >= 80,
      "the configured deadline was not waited for",
    );
    await assertWithin(waits, 100);
    assert.match(errors[0]!.message, /no answer within 100 ms/);
  });
});

describe("a memory service that accepts and never answers: aborts and the OpenAI wrapper", () => {
  it("the call's abort signal ends the wait before the deadline", async () => {
    const { errors, reportedAt, options } = recorder();
    const { model } = timedModel();
    let controller = new AbortController();
    // The call is aborted 100 ms after the memory layer was handed it.
    const { model: wrapped, entered } = entering(
      withMemory(model, { ...options, contextTimeoutMs: 5000 }),
      100,
      () => controller.abort(),
    );
    const waits: Wait[] = [];
    for (let call = 0; call < 2; call += 1) {
      controller = new AbortController();
      await generateText({
        model: wrapped,
        prompt: `Abort me ${call}?`,
        abortSignal: controller.signal,
        providerOptions: { memory: { userId: "alice" } },
      }).catch(() => undefined); // the model may refuse an aborted call; either way the wait ended
      // Until the memory layer gave up waiting (and reported it).
      waits.push(entered[call]!.end(reportedAt[call]!));
    }
    await assertWithin(waits, 100);
    assert.equal(errors[0]?.code, "memory_context_failed");
    assert.match(errors[0]!.message, /aborted/);
  });

  it("the OpenAI wrapper: the request reaches the model within 300 ms + 50 ms, for Chat Completions and Responses", async () => {
    const { errors, lines, options } = recorder();
    const openai = new OpenAI({ apiKey: "sk-test", baseURL: wire.baseURL, maxRetries: 0 });
    // The OpenAI client the wrapper is given, noting when the wrapper hands it each call.
    const handedAt: number[] = [];
    const noting = {
      chat: {
        completions: {
          create: (...args: Parameters<typeof openai.chat.completions.create>) => {
            handedAt.push(performance.now());
            return openai.chat.completions.create(...args);
          },
        },
      },
      responses: {
        create: (...args: Parameters<typeof openai.responses.create>) => {
          handedAt.push(performance.now());
          return openai.responses.create(...args);
        },
      },
    };
    const client = createOpenAIMiddleware(noting, { ...options, userId: "alice" });
    const waits: Wait[] = [];
    for (let call = 0; call < 2; call += 1) {
      const started = startWait(300);
      const completion = (await client.chat.completions.create({
        model: "scripted",
        messages: [{ role: "user", content: `Hello ${call}?` }],
      })) as OpenAI.ChatCompletion;
      assert.equal(completion.choices[0]!.message.content, "answered");
      waits.push(started.end(handedAt.at(-1)!));
    }
    await assertWithin(waits, 300);
    const responseWaits: Wait[] = [];
    for (let call = 0; call < 2; call += 1) {
      const started = startWait(300);
      const response = (await client.responses.create({
        model: "scripted",
        input: `And the Responses API ${call}?`,
      })) as OpenAI.Responses.Response;
      assert.equal(response.output_text, "answered");
      responseWaits.push(started.end(handedAt.at(-1)!));
    }
    await assertWithin(responseWaits, 300);
    assert.equal(errors.filter((error) => error.code === "memory_context_failed").length, 4);
    assert.equal(lines.filter((line) => /memory context unavailable/.test(line)).length, 4);
  });

  it("the OpenAI wrapper honours the request's abort signal", async () => {
    const { errors, reportedAt, options } = recorder();
    const client = createOpenAIMiddleware(
      new OpenAI({ apiKey: "sk-test", baseURL: wire.baseURL, maxRetries: 0 }),
      { ...options, userId: "alice", contextTimeoutMs: 5000 },
    );
    const waits: Wait[] = [];
    for (let call = 0; call < 2; call += 1) {
      const started = startWait(100);
      await client.chat.completions
        .create(
          { model: "scripted", messages: [{ role: "user", content: `Abort ${call}?` }] },
          { signal: AbortSignal.timeout(100) },
        )
        .catch(() => undefined);
      // Until the memory layer gave up waiting (and reported it).
      waits.push(started.end(reportedAt[call]!));
    }
    await assertWithin(waits, 100);
    assert.match(errors[0]!.message, /aborted/);
  });
});
