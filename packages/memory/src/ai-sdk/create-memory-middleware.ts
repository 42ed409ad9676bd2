/**
 * `createMemoryMiddleware`: an AI SDK language-model middleware that injects the context bundle as a
 * system message and captures each finished turn, for `generateText` and `streamText` alike.
 * Identity is read from `providerOptions.memory` on every call, never kept between calls, so one
 * wrapped model serves concurrent tenants.
 */
import type {
  LanguageModelV4CallOptions,
  LanguageModelV4Middleware,
  LanguageModelV4Prompt,
  LanguageModelV4StreamPart,
} from "@ai-sdk/provider";
import {
  createMemoryMiddlewareCore,
  type MemoryMiddlewareCore,
  type MemoryMiddlewareCoreOptions,
} from "../middleware/create-memory-middleware-core.ts";
import type { MemoryIdentity } from "../middleware/memory-identity.ts";
import { parseMemoryIdentity } from "../middleware/parse-memory-identity.ts";
import { toTurnMessages } from "./to-turn-messages.ts";

export type MemoryMiddlewareOptions = MemoryMiddlewareCoreOptions;

/** Marks the system message we add, so capture never mistakes it for the caller's prompt. */
const injectedMessages = new WeakSet<object>();

export function createMemoryMiddleware(options: MemoryMiddlewareOptions): LanguageModelV4Middleware {
  return fromCore(createMemoryMiddlewareCore(options));
}

/** The middleware over an existing core (the OpenAI wrapper and benchmarks share one). */
export function fromCore(core: MemoryMiddlewareCore): LanguageModelV4Middleware {
  // zod compiles the identity schema on its first parse (about 5 ms, several times that on a busy
  // machine): paid here, once, not by the first call before its context deadline has even started.
  parseMemoryIdentity({}, "warm-up");
  const identityOf = (params: LanguageModelV4CallOptions): MemoryIdentity =>
    core.resolve(parseMemoryIdentity(params.providerOptions?.memory, "providerOptions.memory"));

  const callerPrompt = (prompt: LanguageModelV4Prompt) =>
    prompt.filter((message) => !injectedMessages.has(message));

  return {
    specificationVersion: "v4",

    async transformParams({ params }) {
      const identity = identityOf(params);
      const envelope = await core.getContext(identity, toTurnMessages(params.prompt), params.abortSignal);
      if (envelope === undefined) return params;
      const system = { role: "system" as const, content: envelope.text };
      injectedMessages.add(system);
      // After the caller's own leading system messages: theirs keep the first word.
      const leading = params.prompt.findIndex((message) => message.role !== "system");
      const at = leading === -1 ? params.prompt.length : leading;
      return { ...params, prompt: [...params.prompt.slice(0, at), system, ...params.prompt.slice(at)] };
    },

    async wrapGenerate({ doGenerate, params }) {
      const result = await doGenerate();
      if (result.finishReason.unified !== "tool-calls") {
        const text = result.content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("");
        await core.captureTurn(identityOf(params), toTurnMessages(callerPrompt(params.prompt)), text);
      }
      return result;
    },

    async wrapStream({ doStream, params }) {
      const identity = identityOf(params);
      const messages = toTurnMessages(callerPrompt(params.prompt));
      const { stream, ...rest } = await doStream();
      let text = "";
      let finishedWithToolCalls = false;
      let finished = false;
      const capturing = new TransformStream<LanguageModelV4StreamPart, LanguageModelV4StreamPart>({
        transform(part, controller) {
          if (part.type === "text-delta") text += part.delta;
          else if (part.type === "finish") {
            finished = true;
            finishedWithToolCalls = part.finishReason.unified === "tool-calls";
          }
          controller.enqueue(part);
        },
        // Runs when the stream ends; an aborted or failed stream is not a finished turn.
        async flush() {
          if (finished && !finishedWithToolCalls) await core.captureTurn(identity, messages, text);
        },
      });
      return { stream: stream.pipeThrough(capturing), ...rest };
    },
  };
}
