/**
 * `createMemoryMiddlewareCore`: the inject-and-capture engine both provider middlewares share.
 * It never throws into the model call and never holds it past a deadline: the context fetch gets
 * `contextTimeoutMs` (default 300 ms) and the call's abort signal, after which the model is called
 * without memory; a failed capture is dropped. Every failure is reported on every call: `onError`,
 * an event on an OpenTelemetry span, and a log line.
 */
import { SpanStatusCode, trace } from "@opentelemetry/api";
import type { Logger } from "@tackle/core";
import { MemoryClient, type MemoryClientOptions } from "../client/memory-client.ts";
import { onScopePurged } from "../client/purge-notices.ts";
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
  /** Reports a degraded call (every one, not only the first). */
  readonly onError?: (error: MemoryMiddlewareError) => void;
  /** Where each failure's log line goes (default: `console.warn`). */
  readonly logger?: Pick<Logger, "warn">;
  /**
   * How long the model call may wait for its memory context, in milliseconds (default 300). Past it
   * (or when the call's abort signal fires first) the model is called without memory and the
   * failure is reported.
   */
  readonly contextTimeoutMs?: number;
  /** How long one background capture may take before it is dropped and reported (default 10 000 ms). */
  readonly captureTimeoutMs?: number;
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
    signal?: AbortSignal,
  ): Promise<MemoryContextEnvelope | undefined>;
  /** Writes the user's last message and the response as events; resolves when stored if `awaitCapture`. */
  captureTurn(identity: MemoryIdentity, messages: readonly TurnMessage[], response: string): Promise<void>;
  /** Resolves when every background capture started so far has settled. */
  flush(): Promise<void>;
}

/** The default deadline of the context fetch: memory is worth little next to a slow answer. */
export const DEFAULT_CONTEXT_TIMEOUT_MS = 300;
const DEFAULT_CAPTURE_TIMEOUT_MS = 10_000;
const tracer = trace.getTracer("@tackle/memory", "0.1.0");
const consoleLogger: Pick<Logger, "warn"> = {
  warn: (message, fields) => console.warn(`[@tackle/memory] ${message}`, fields ?? {}),
};

export function createMemoryMiddlewareCore(options: MemoryMiddlewareCoreOptions): MemoryMiddlewareCore {
  const contextTimeoutMs = options.contextTimeoutMs ?? DEFAULT_CONTEXT_TIMEOUT_MS;
  const captureTimeoutMs = options.captureTimeoutMs ?? DEFAULT_CAPTURE_TIMEOUT_MS;
  const logger = options.logger ?? consoleLogger;
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
  let warnedNoScope = false;
  // A purge through any client of this process drops every bundle of this cache that may hold some
  // of the purged scope (no field set on both sides differs); a dropped bundle is only fetched again.
  if (cache !== undefined) {
    onScopePurged(cache, (held, scope) =>
      held.forget((owner) =>
        MEMORY_SCOPE_VALUES.every((field) => {
          const value = (owner as MemoryIdentity)[field];
          return scope[field] === undefined || value === undefined || value === scope[field];
        }),
      ),
    );
  }
  const pending = new Set<Promise<void>>();

  /** Every failure, every time: the hook, a span event (on the caller's span if any), a log line. */
  function report(error: MemoryMiddlewareError): void {
    const phase = String((error.data as { phase?: string } | undefined)?.phase ?? "middleware");
    const attributes = {
      "memory.error.code": error.code,
      "memory.error.phase": phase,
      "memory.error.message": error.message,
    };
    const active = trace.getActiveSpan();
    if (active !== undefined) active.addEvent(error.code, attributes);
    else {
      const span = tracer.startSpan(`memory.${phase}`);
      span.addEvent(error.code, attributes);
      span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
      span.end();
    }
    try {
      logger.warn(error.message, {
        code: error.code,
        phase,
        cause: describe(error.cause),
      });
    } catch {
      // A logger that throws must not break the model call.
    }
    if (options.onError !== undefined) {
      try {
        options.onError(error);
      } catch (hookError) {
        console.warn("[@tackle/memory] onError threw while reporting a memory failure", hookError);
      }
    }
  }

  /** The fetch runs under its own deadline (shared through the cache); each caller waits at most that long. */
  async function fetchBundle(
    identity: MemoryIdentity,
    query: string | undefined,
    signal: AbortSignal,
  ): Promise<MemoryContextBundle> {
    const scopeFields = retrievalFields(identity);
    const request: Record<string, unknown> = { ...options.bundle };
    for (const field of scopeFields) request[field] = identity[field];
    if (query !== undefined) request.query = query.slice(-2000);
    return toMemoryContextBundle(
      await client.contextBundle(request, { signal, timeoutMs: contextTimeoutMs }),
    );
  }

  async function loadBundle(identity: MemoryIdentity, messages: readonly TurnMessage[], signal: AbortSignal) {
    // No one named: the service reads a whole tenant only when asked to (ADR 0366), and a prompt
    // must not carry every user's memory, so nothing is injected; said once in the log.
    if (retrievalFields(identity).length === 0) {
      if (!warnedNoScope)
        logger.warn("memory context skipped: the call names no userId, agentId or sessionId");
      warnedNoScope = true;
      return undefined;
    }
    const userText = lastUserText(messages);
    const mode = identity.mode ?? (userText === undefined ? "wake-up" : "full");
    const query = mode === "full" ? userText : undefined;
    // Fetch unless this is a tool-loop step: the user has spoken, and the last message is a tool result or the assistant's.
    const mayFetch = messages.at(-1)?.role === "user" || !messages.some((message) => message.role === "user");
    const key =
      cache !== undefined && hasDiscriminator(identity) ? await keyFor(identity, mode, query) : undefined;
    if (key === undefined) return mayFetch ? fetchBundle(identity, query, signal) : undefined;
    const cached = cache!.get(key);
    if (cached !== undefined) return cached;
    // A tool-loop step never fetches again: it reuses the turn's bundle or injects nothing.
    if (!mayFetch) return undefined;
    // A cached fetch may serve other calls: it gets the deadline, not this call's abort signal.
    const loading = fetchBundle(identity, query, AbortSignal.timeout(contextTimeoutMs));
    cache!.set(key, loading, identity);
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

  async function storeTurn(
    identity: MemoryIdentity,
    messages: readonly TurnMessage[],
    response: string,
    signal: AbortSignal,
  ) {
    const userText = lastUserText(messages);
    if (userText === undefined || response.trim() === "") return;
    const key = await captureKey(identity, messages, response);
    const scope: Record<string, string> = {};
    for (const field of MEMORY_SCOPE_VALUES)
      if (identity[field] !== undefined) scope[field] = identity[field];
    // Sequential, so the user's event is ordered before the answer.
    await client.writeEvent(
      {
        ...scope,
        role: "user",
        content: userText.slice(0, MAX_EVENT_CHARACTERS),
        ...(key === undefined ? {} : { customId: `${key}:user` }),
      },
      { signal },
    );
    await client.writeEvent(
      {
        ...scope,
        role: "assistant",
        content: response.slice(0, MAX_EVENT_CHARACTERS),
        infer: false,
        ...(key === undefined ? {} : { customId: `${key}:assistant` }),
      },
      { signal },
    );
  }

  return {
    resolve: (request) => resolveIdentity(defaults, request),

    async getContext(identity, messages, callSignal) {
      if (options.inject === false) return undefined;
      const started = performance.now();
      const deadline = AbortSignal.timeout(contextTimeoutMs);
      const signal = callSignal === undefined ? deadline : AbortSignal.any([deadline, callSignal]);
      try {
        const bundle = await untilAborted(loadBundle(identity, messages, signal), signal);
        return bundle === undefined ? undefined : renderMemoryContext(bundle);
      } catch (error) {
        const elapsedMs = Math.round(performance.now() - started);
        const reason = deadline.aborted
          ? `no answer within ${contextTimeoutMs} ms`
          : callSignal?.aborted
            ? "the call was aborted"
            : describe(error);
        report(
          new MemoryMiddlewareError(
            "memory_context_failed",
            `memory context unavailable (the model was called without it): ${reason}`,
            error,
            { elapsedMs, timeoutMs: contextTimeoutMs },
          ),
        );
        return undefined;
      }
    },

    captureTurn(identity, messages, response) {
      if (options.capture === false) return Promise.resolve();
      const deadline = AbortSignal.timeout(captureTimeoutMs);
      const capture = untilAborted(storeTurn(identity, messages, response, deadline), deadline).catch(
        (error: unknown) => {
          report(
            new MemoryMiddlewareError(
              "memory_capture_failed",
              `turn not captured: ${describe(error)}`,
              error,
            ),
          );
        },
      );
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

/** `promise`, or a rejection as soon as `signal` aborts (a client that ignores the signal cannot hold us). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
