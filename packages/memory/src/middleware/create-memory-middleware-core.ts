/**
 * `createMemoryMiddlewareCore`: the inject-and-capture engine both provider middlewares share.
 * It never throws into the model call: a failed fetch injects nothing, a failed capture is dropped,
 * and either is reported through `onError` (else one `console.warn` per instance).
 */
import { MemoryClient, type MemoryClientOptions } from "../client/memory-client.ts";
import { MEMORY_SCOPE_VALUES, type MemoryScopeField } from "../scope/memory-scope.ts";
import { type BundleCache, type BundleCacheOptions, createBundleCache } from "./cache/bundle-cache.ts";
import { cacheIdentityKey } from "./cache/cache-identity.ts";
import { sha256Hex } from "./cache/sha256-hex.ts";
import { captureKey } from "./capture-key.ts";
import { type MemoryContextEnvelope, renderMemoryContext } from "./envelope/render-memory-context.ts";
import type { MemoryContextBundle } from "./memory-context-bundle.ts";
import { hasDiscriminator, type MemoryIdentity, resolveIdentity } from "./memory-identity.ts";
import type { MemoryMiddlewareClient } from "./memory-middleware-client.ts";
import { MemoryMiddlewareError } from "./memory-middleware-error.ts";
import { toMemoryContextBundle } from "./to-memory-context-bundle.ts";
import { lastUserText, type TurnMessage } from "./turn-message.ts";

/** The longest event the service accepts; a longer turn is captured truncated rather than dropped. */
const MAX_EVENT_CHARACTERS = 32_000;

export interface MemoryMiddlewareCoreOptions extends MemoryIdentity {
  /**
   * The service's URL (default: the `MemoryClient` default, `TACKLE_MEMORY_URL`). Ignored for
   * requests when `client` is given, but always part of the cache identity.
   */
  readonly apiUrl?: string;
  /** The API key (default `TACKLE_MEMORY_API_KEY`); the cache identity holds only its SHA-256. */
  readonly apiKey?: string;
  /** A client to use instead of building one from `apiUrl`, `apiKey` and `clientOptions`. */
  readonly client?: MemoryMiddlewareClient;
  /** Timeouts, retries and the private-network switch of the client built here. */
  readonly clientOptions?: Omit<MemoryClientOptions, "baseUrl" | "apiKey">;
  /** Reports a degraded call; without it the first failure is a `console.warn`, later ones are silent. */
  readonly onError?: (error: MemoryMiddlewareError) => void;
  /** Cache bounds (default 50 entries, 60 s), or `false` to fetch on every call. */
  readonly cache?: BundleCacheOptions | false;
  /** Inject the context bundle (default true). */
  readonly inject?: boolean;
  /** Capture each finished turn (default true). */
  readonly capture?: boolean;
  /** Hold the model call's result until its capture is stored (default false: capture in the background). */
  readonly awaitCapture?: boolean;
  /** Forwarded to the context-bundle request. */
  readonly bundle?: {
    readonly tokenBudget?: number;
    readonly maxMemories?: number;
    readonly maxEvents?: number;
  };
}

export interface MemoryMiddlewareCore {
  /** This call's identity: the request's fields over the constructor's. */
  resolve(request: MemoryIdentity | undefined): MemoryIdentity;
  /** The envelope to inject, or undefined (nothing to say, a tool-loop step, or a failure reported). */
  getContext(
    identity: MemoryIdentity,
    messages: readonly TurnMessage[],
  ): Promise<MemoryContextEnvelope | undefined>;
  /** Writes the user's last message and the response as events; resolves when stored if `awaitCapture`. */
  captureTurn(identity: MemoryIdentity, messages: readonly TurnMessage[], response: string): Promise<void>;
  /** Resolves when every background capture started so far has settled. */
  flush(): Promise<void>;
}

export function createMemoryMiddlewareCore(options: MemoryMiddlewareCoreOptions): MemoryMiddlewareCore {
  const client =
    options.client ??
    new MemoryClient({
      ...options.clientOptions,
      ...(options.apiUrl === undefined ? {} : { baseUrl: options.apiUrl }),
      ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
    });
  const apiUrl = options.apiUrl ?? (client as { baseUrl?: string }).baseUrl ?? "";
  const defaults: MemoryIdentity = {
    ...(options.userId === undefined ? {} : { userId: options.userId }),
    ...(options.agentId === undefined ? {} : { agentId: options.agentId }),
    ...(options.sessionId === undefined ? {} : { sessionId: options.sessionId }),
    ...(options.scope === undefined ? {} : { scope: options.scope }),
    ...(options.mode === undefined ? {} : { mode: options.mode }),
  };
  const cache: BundleCache<MemoryContextBundle> | undefined =
    options.cache === false ? undefined : createBundleCache(options.cache ?? {});
  let apiKeyHash: Promise<string | undefined> | undefined;
  const pending = new Set<Promise<void>>();
  let warned = false;

  function report(error: MemoryMiddlewareError): void {
    if (options.onError !== undefined) {
      try {
        options.onError(error);
      } catch (hookError) {
        console.warn("[@tackle/memory] onError threw while reporting a memory failure", hookError);
      }
      return;
    }
    if (warned) return;
    warned = true;
    console.warn(
      `[@tackle/memory] ${error.message} (further failures of this middleware are not logged; pass onError to see them)`,
      error.cause,
    );
  }

  async function fetchBundle(
    identity: MemoryIdentity,
    query: string | undefined,
  ): Promise<MemoryContextBundle> {
    const scopeFields = retrievalFields(identity);
    const request: Record<string, unknown> = { ...options.bundle };
    for (const field of scopeFields) request[field] = identity[field];
    if (query !== undefined) request.query = query.slice(-2000);
    return toMemoryContextBundle(await client.contextBundle(request));
  }

  async function loadBundle(identity: MemoryIdentity, messages: readonly TurnMessage[]) {
    const userText = lastUserText(messages);
    const mode = identity.mode ?? (userText === undefined ? "wake-up" : "full");
    const query = mode === "full" ? userText : undefined;
    // Fetch unless this is a tool-loop step: the user has spoken, and the last message is a tool result or the assistant's.
    const mayFetch = messages.at(-1)?.role === "user" || !messages.some((message) => message.role === "user");
    const key =
      cache !== undefined && hasDiscriminator(identity) ? await keyFor(identity, mode, query) : undefined;
    if (key === undefined) return mayFetch ? fetchBundle(identity, query) : undefined;
    const cached = cache!.get(key);
    if (cached !== undefined) return cached;
    // A tool-loop step never fetches again: it reuses the turn's bundle or injects nothing.
    if (!mayFetch) return undefined;
    const loading = fetchBundle(identity, query);
    cache!.set(key, loading);
    return loading;
  }

  async function keyFor(identity: MemoryIdentity, mode: "full" | "wake-up", query: string | undefined) {
    apiKeyHash ??= sha256Hex(options.apiKey ?? "");
    const hash = await apiKeyHash;
    if (hash === undefined) {
      apiKeyHash = undefined; // WebCrypto may appear later (a polyfill); ask again next time
      return undefined;
    }
    return cacheIdentityKey({
      agentId: identity.agentId,
      apiUrl,
      apiKeyHash: hash,
      mode,
      scope: retrievalFields(identity),
      sessionId: identity.sessionId,
      userId: identity.userId,
      query,
    });
  }

  async function storeTurn(identity: MemoryIdentity, messages: readonly TurnMessage[], response: string) {
    const userText = lastUserText(messages);
    if (userText === undefined || response.trim() === "") return;
    const key = await captureKey(identity, messages, response);
    const scope: Record<string, string> = {};
    for (const field of MEMORY_SCOPE_VALUES)
      if (identity[field] !== undefined) scope[field] = identity[field];
    // Sequential, so the user's event is ordered before the answer.
    await client.writeEvent({
      ...scope,
      role: "user",
      content: userText.slice(0, MAX_EVENT_CHARACTERS),
      ...(key === undefined ? {} : { customId: `${key}:user` }),
    });
    await client.writeEvent({
      ...scope,
      role: "assistant",
      content: response.slice(0, MAX_EVENT_CHARACTERS),
      infer: false,
      ...(key === undefined ? {} : { customId: `${key}:assistant` }),
    });
  }

  return {
    resolve: (request) => resolveIdentity(defaults, request),

    async getContext(identity, messages) {
      if (options.inject === false) return undefined;
      try {
        const bundle = await loadBundle(identity, messages);
        return bundle === undefined ? undefined : renderMemoryContext(bundle);
      } catch (error) {
        report(
          new MemoryMiddlewareError(
            "memory_context_failed",
            `memory context unavailable: ${describe(error)}`,
            error,
          ),
        );
        return undefined;
      }
    },

    captureTurn(identity, messages, response) {
      if (options.capture === false) return Promise.resolve();
      const capture = storeTurn(identity, messages, response).catch((error: unknown) => {
        report(
          new MemoryMiddlewareError("memory_capture_failed", `turn not captured: ${describe(error)}`, error),
        );
      });
      pending.add(capture);
      void capture.finally(() => pending.delete(capture));
      return options.awaitCapture === true ? capture : Promise.resolve();
    },

    async flush() {
      while (pending.size > 0) await Promise.all(pending);
    },
  };
}

/**
 * The identity fields that bound retrieval. Scope is an AND, and memories learned in one session
 * belong to the user, so by default the session narrows retrieval only when nothing else names
 * whose memory it is; `identity.scope` overrides this.
 */
function retrievalFields(identity: MemoryIdentity): MemoryScopeField[] {
  const given = MEMORY_SCOPE_VALUES.filter((field) => identity[field] !== undefined);
  if (identity.scope !== undefined) return given.filter((field) => identity.scope!.includes(field));
  const owners = given.filter((field) => field !== "sessionId");
  return owners.length > 0 ? owners : given;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
