/**
 * The app of `middleware-faults.property.test.ts`: real AI SDK calls (`generateText`, `streamText`)
 * through `withMemory` over the AI SDK's scripted `MockLanguageModelV4`, and real OpenAI SDK calls
 * (chat completions, streamed or not, and responses) through `createOpenAIMiddleware` to a scripted
 * OpenAI wire server. Every call runs in an `AsyncLocalStorage` scope holding its `Turn`, so each
 * `onError` report is filed under the call it degraded.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { LanguageModelV4CallOptions } from "@ai-sdk/provider";
import { generateText, type LanguageModel, streamText } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import OpenAI from "openai";
import { withMemory } from "../../src/ai-sdk/index.ts";
import type { MemoryMiddlewareCoreOptions } from "../../src/middleware/create-memory-middleware-core.ts";
import type { MemoryMiddlewareError } from "../../src/middleware/memory-middleware-error.ts";
import { createOpenAIMiddleware } from "../../src/openai/index.ts";
import {
  lastUserText,
  systemText,
  textResult,
  textStream,
} from "../../test-middleware/support/scripted-model.ts";
import {
  type OpenAIWireServer,
  startOpenAIWireServer,
} from "../../test-middleware/support/start-openai-wire-server.ts";
import type { Tenant } from "./middleware-faults.ts";

export type Via = "generateText" | "streamText" | "chat" | "chat-stream" | "responses";

export interface Turn {
  readonly callId: string;
  readonly tenant: Tenant;
  readonly user: string;
  readonly session: string;
  readonly via: Via;
  readonly userText: string;
  /** The scripted model fails this call with its own error. */
  readonly modelFails: boolean;
  /** An AI SDK call in `wake-up` mode: no query, so its bundle is cached per identity and shared. */
  readonly wakeUp: boolean;
  /** The conversation before this turn. */
  readonly history: readonly History[];
  reply?: string;
  /** The call's error, when it threw. */
  thrown?: unknown;
  /** The system text the model saw ("" when nothing was injected). */
  saw?: string;
  elapsedMs?: number;
  readonly errors: MemoryMiddlewareError[];
  /** The log lines the middleware wrote for this call. */
  readonly logged: string[];
}

export interface History {
  readonly role: "user" | "assistant";
  readonly text: string;
}

const current = new AsyncLocalStorage<Turn>();
/** Reports no call owned: a failure reported outside any call's scope. */
export const orphanErrors: MemoryMiddlewareError[] = [];
const onError = (error: MemoryMiddlewareError) => (current.getStore()?.errors ?? orphanErrors).push(error);
const logger = {
  warn: (message: string) => (current.getStore()?.logged ?? orphanLines).push(message),
};
/** Log lines no call owned. */
export const orphanLines: string[] = [];

/** Acme's middlewares hold the call until its turn is stored; globex's capture in the background. */
export const awaitsCapture = (tenant: Tenant) => tenant === "acme";

const callIdOf = (text: string) => /\bc\d+\b/.exec(text)?.[0] ?? "none";
/** The scripted model's own failures: the AI SDK model's error, the OpenAI SDK's 404. */
export function isModelError(turn: Turn): boolean {
  if (turn.via === "generateText" || turn.via === "streamText")
    return turn.thrown instanceof Error && turn.thrown.message === `model failed ${turn.callId}`;
  return turn.thrown instanceof OpenAI.NotFoundError;
}

export const replyTo = (userText: string) => `answer to ${callIdOf(userText)}`;

export interface Callers {
  /** Runs one turn of a conversation through the middleware its `via` names. */
  call(turn: Turn): Promise<void>;
  close(): Promise<void>;
}

type BaseOptions = (tenant: Tenant) => MemoryMiddlewareCoreOptions;

export async function startCallers(
  apiUrl: string,
  apiKeys: Record<Tenant, string>,
  options: Pick<MemoryMiddlewareCoreOptions, "contextTimeoutMs" | "captureTimeoutMs" | "bundle">,
): Promise<Callers> {
  const saw = new Map<string, string>();
  // The calls the scripted AI SDK model fails with its own error.
  const failing = new Set<string>();
  const base: BaseOptions = (tenant) => ({
    apiUrl,
    apiKey: apiKeys[tenant],
    clientOptions: { allowPrivateNetwork: true, retryBaseMs: 50 },
    awaitCapture: awaitsCapture(tenant),
    onError,
    logger,
    ...options,
  });
  const models = aiSdkModels(base, saw, failing);
  const wire: OpenAIWireServer = await startOpenAIWireServer(
    (body) => {
      const items = (body.messages ?? body.input ?? []) as { role?: string; content?: unknown }[];
      const user = String(items.findLast((item) => item.role === "user")?.content ?? "");
      const system = items.filter((item) => item.role === "system").map((item) => String(item.content));
      saw.set(callIdOf(user), system.join("\n"));
      return replyTo(user);
    },
    { jitterMs: 2, record: false },
  );
  const wrapperFor = openAIWrappers(base, wire.baseURL);
  return {
    async call(turn) {
      const started = performance.now();
      if (turn.modelFails) failing.add(turn.callId);
      await current.run(turn, async () => {
        try {
          turn.reply =
            turn.via === "generateText" || turn.via === "streamText"
              ? await viaAiSdk(models[turn.tenant], turn)
              : await viaOpenAI(wrapperFor(turn), turn);
        } catch (error) {
          turn.thrown = error;
        }
      });
      turn.elapsedMs = performance.now() - started;
      turn.saw = saw.get(turn.callId) ?? "";
    },
    close: () => wire.close(),
  };
}

/**
 * One wrapped model per tenant, shared by every user and session: identity is per call, and the
 * bundle cache is shared. `saw` gets each call's system text; a call in `failing` fails once.
 */
function aiSdkModels(
  base: BaseOptions,
  saw: Map<string, string>,
  failing: Set<string>,
): Record<Tenant, LanguageModel> {
  const model = new MockLanguageModelV4({
    doGenerate: async (call: LanguageModelV4CallOptions) => {
      const text = lastUserText(call);
      saw.set(callIdOf(text), systemText(call));
      if (failing.delete(callIdOf(text))) throw new Error(`model failed ${callIdOf(text)}`);
      return textResult(replyTo(text));
    },
    doStream: async (call: LanguageModelV4CallOptions) => {
      const text = lastUserText(call);
      saw.set(callIdOf(text), systemText(call));
      return { stream: textStream(replyTo(text)) };
    },
  });
  return { acme: withMemory(model, base("acme")), globex: withMemory(model, base("globex")) };
}

/** Chat Completions has no per-request identity: one wrapper per session, as documented. */
function openAIWrappers(base: BaseOptions, baseURL: string): (turn: Turn) => OpenAI {
  const openai = new OpenAI({ baseURL, apiKey: "scripted", maxRetries: 0 });
  // A path the scripted server does not serve: the model's own failure (the OpenAI SDK's 404 error).
  const broken = new OpenAI({ baseURL: `${baseURL}/missing`, apiKey: "scripted", maxRetries: 0 });
  const wrappers = new Map<string, OpenAI>();
  return (turn) => {
    const key = `${turn.tenant}/${turn.user}/${turn.session}/${turn.modelFails}`;
    let wrapped = wrappers.get(key);
    if (wrapped === undefined) {
      wrapped = createOpenAIMiddleware(turn.modelFails ? broken : openai, {
        ...base(turn.tenant),
        userId: turn.user,
        sessionId: turn.session,
      });
      wrappers.set(key, wrapped);
    }
    return wrapped;
  };
}

async function viaOpenAI(client: OpenAI, turn: Turn): Promise<string> {
  const messages = [
    { role: "system" as const, content: "You are terse." },
    ...turn.history.map((entry) => ({ role: entry.role, content: entry.text })),
    { role: "user" as const, content: turn.userText },
  ];
  if (turn.via === "chat") {
    const answer = await client.chat.completions.create({ model: "scripted", messages });
    return answer.choices[0]?.message.content ?? "";
  }
  if (turn.via === "chat-stream") {
    const stream = await client.chat.completions.create({ model: "scripted", messages, stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    return text;
  }
  const answer = await client.responses.create({ model: "scripted", input: messages });
  return answer.output_text;
}

async function viaAiSdk(model: LanguageModel, turn: Turn): Promise<string> {
  const call = {
    model,
    system: "You are terse.",
    messages: [
      ...turn.history.map((entry) => ({ role: entry.role, content: entry.text })),
      { role: "user" as const, content: turn.userText },
    ],
    maxRetries: 0,
    providerOptions: {
      memory: { userId: turn.user, sessionId: turn.session, ...(turn.wakeUp ? { mode: "wake-up" } : {}) },
    },
  };
  if (turn.via === "generateText") return (await generateText(call)).text;
  const result = streamText(call);
  let text = "";
  for await (const delta of result.textStream) text += delta;
  return text;
}
