/**
 * `createOpenAIMiddleware`: an OpenAI client that remembers. A Proxy chain (client → chat →
 * completions, client → responses) intercepts `create`, injects the context bundle and captures the
 * turn, streams included; the caller's client is never mutated and `openai` is never imported.
 * Chat Completions has no per-request options channel, so identity comes from the constructor only.
 */
import {
  createMemoryMiddlewareCore,
  type MemoryMiddlewareCore,
  type MemoryMiddlewareCoreOptions,
} from "../middleware/create-memory-middleware-core.ts";
import type { TurnMessage } from "../middleware/turn-message.ts";
import {
  chatAnswer,
  chatTurnMessages,
  createChatStreamCollector,
  injectIntoChat,
} from "./chat-completions-turn.ts";
import { type ApiPromiseLike, deferApiPromise, type StartedCall } from "./defer-api-promise.ts";
import type {
  ChatCompletion,
  ChatCompletionParams,
  ResponseObject,
  ResponseParams,
} from "./openai-shapes.ts";
import {
  createResponsesStreamCollector,
  injectIntoResponses,
  responseAnswer,
  responsesTurnMessages,
} from "./responses-turn.ts";
import { isStream, wrapStream } from "./wrap-stream.ts";

export type OpenAIMiddlewareOptions = MemoryMiddlewareCoreOptions;

type Create = (params: never, requestOptions?: unknown) => ApiPromiseLike<unknown>;

/** Any object shaped like the OpenAI client: `chat.completions.create` and/or `responses.create`. */
export type OpenAIClientLike = object;

export function createOpenAIMiddleware<Client extends OpenAIClientLike>(
  client: Client,
  options: OpenAIMiddlewareOptions,
): Client {
  return wrapOpenAIClient(client, createMemoryMiddlewareCore(options));
}

/** The Proxy chain over an existing core. */
export function wrapOpenAIClient<Client extends OpenAIClientLike>(
  client: Client,
  core: MemoryMiddlewareCore,
): Client {
  const identity = core.resolve(undefined);

  const chatCreate = (completions: object) => {
    const create = Reflect.get(completions, "create", completions) as Create;
    return (params: ChatCompletionParams, requestOptions?: unknown) => {
      const messages = chatTurnMessages(params.messages ?? []);
      return remember(
        messages,
        async () => {
          const envelope = await core.getContext(identity, messages, signalOf(requestOptions));
          const sent = envelope === undefined ? params : injectIntoChat(params, envelope.text);
          return { call: create.call(completions, sent as never, requestOptions) };
        },
        (data) => {
          if (!isStream(data)) return chatAnswer(data as ChatCompletion);
          return createChatStreamCollector() as Collector;
        },
      );
    };
  };

  const responsesCreate = (responses: object) => {
    const create = Reflect.get(responses, "create", responses) as Create;
    return (params: ResponseParams, requestOptions?: unknown) => {
      const messages = responsesTurnMessages(params);
      return remember(
        messages,
        async () => {
          const envelope = await core.getContext(identity, messages, signalOf(requestOptions));
          const sent = envelope === undefined ? params : injectIntoResponses(params, envelope.text);
          return { call: create.call(responses, sent as never, requestOptions) };
        },
        (data) => {
          if (!isStream(data)) return responseAnswer(data as ResponseObject);
          return createResponsesStreamCollector() as Collector;
        },
      );
    };
  };

  type Collector = { observe(item: unknown): void; answer(): string | undefined };

  /** Starts the call; captures a plain answer when it arrives and a stream when it has been read through. */
  function remember(
    messages: TurnMessage[],
    start: () => Promise<StartedCall<unknown>>,
    read: (data: unknown) => string | undefined | Collector,
  ) {
    return deferApiPromise(start(), async (data) => {
      const answer = read(data);
      if (typeof answer === "object" && isStream(data)) {
        return wrapStream(data, client, answer.observe, async () => {
          const text = answer.answer();
          if (text !== undefined) await core.captureTurn(identity, messages, text);
        });
      }
      if (typeof answer === "string") await core.captureTurn(identity, messages, answer);
      return data;
    });
  }

  const completions = proxyWith((target) => ({ create: chatCreate(target) }));
  const chat = proxyWith((target) => ({
    completions: completions(Reflect.get(target, "completions", target) as object),
  }));
  const responses = proxyWith((target) => ({ create: responsesCreate(target) }));
  return proxyWith((target) => ({
    chat: chat(Reflect.get(target, "chat", target) as object),
    responses: responses(Reflect.get(target, "responses", target) as object),
  }))(client) as Client;
}

/** The OpenAI SDK's per-request `signal`, if the caller passed one. */
function signalOf(requestOptions: unknown): AbortSignal | undefined {
  const signal = (requestOptions as { signal?: unknown } | undefined)?.signal;
  return signal instanceof AbortSignal ? signal : undefined;
}

/**
 * A read-only view of `target` whose listed properties are replaced (built once, on first read);
 * every other property reads through, methods bound to the real object so private fields still work.
 */
function proxyWith(overrides: (target: object) => Record<string, unknown>) {
  return (target: object): object => {
    if (typeof target !== "object" || target === null) return target;
    let replaced: Record<string, unknown> | undefined;
    const bound = new Map<PropertyKey, unknown>();
    return new Proxy(target, {
      get(object, property) {
        if (typeof property === "string") {
          replaced ??= overrides(object);
          if (Object.hasOwn(replaced, property) && Reflect.get(object, property, object) !== undefined) {
            return replaced[property];
          }
        }
        const value = Reflect.get(object, property, object);
        if (typeof value !== "function") return value;
        if (!bound.has(property)) bound.set(property, value.bind(object));
        return bound.get(property);
      },
      set: () => false,
      defineProperty: () => false,
      deleteProperty: () => false,
    });
  };
}
