/**
 * `createMemoryMiddlewareCore`: the inject-and-capture engine both provider middlewares share.
 * It never throws into the model call and never holds it past a deadline: the context fetch gets
 * `contextTimeoutMs` (default 300 ms) and the call's abort signal, after which the model is called
 * without memory; a failed capture is dropped. Every failure is reported on every call: `onError`,
 * an event on an OpenTelemetry span, and a log line.
 */
import type { Logger } from "@tackle/core";
import { MemoryClient, type MemoryClientOptions } from "../client/memory-client.ts";
import { onScopePurged } from "../client/purge-notices.ts";
import { MEMORY_SCOPE_VALUES } from "../scope/memory-scope.ts";
import { type BundleCache, type BundleCacheOptions, createBundleCache } from "./cache/bundle-cache.ts";
import { sha256Hex } from "./cache/sha256-hex.ts";
import { type MemoryContextEnvelope, renderMemoryContext } from "./envelope/render-memory-context.ts";
import { bundleCacheKey, fetchBundle, retrievalFields } from "./fetch-context-bundle.ts";
import type { MemoryContextBundle } from "./memory-context-bundle.ts";
import { hasDiscriminator, type MemoryIdentity, resolveIdentity } from "./memory-identity.ts";
import type { MemoryMiddlewareClient } from "./memory-middleware-client.ts";
import { MemoryMiddlewareError } from "./memory-middleware-error.ts";
import { consoleLogger, describeError, reportMemoryFailure } from "./report-memory-failure.ts";
import { storeTurn } from "./store-turn.ts";
import { lastUserText, type TurnMessage } from "./turn-message.ts";
import { untilAborted } from "./until-aborted.ts";

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

export function createMemoryMiddlewareCore(options: MemoryMiddlewareCoreOptions): MemoryMiddlewareCore {
  const contextTimeoutMs = options.contextTimeoutMs ?? DEFAULT_CONTEXT_TIMEOUT_MS;
  const captureTimeoutMs = options.captureTimeoutMs ?? DEFAULT_CAPTURE_TIMEOUT_MS;
  const logger = options.logger ?? consoleLogger;
  const client = options.client ?? clientFrom(options);
  const request = {
    client,
    contextTimeoutMs,
    ...(options.bundle === undefined ? {} : { bundle: options.bundle }),
  };
  const apiUrl = options.apiUrl ?? (client as { baseUrl?: string }).baseUrl ?? "";
  const defaults = identityDefaults(options);
  const cache: BundleCache<MemoryContextBundle> | undefined =
    options.cache === false ? undefined : createBundleCache(options.cache ?? {});
  if (cache !== undefined) forgetPurgedBundles(cache);
  let apiKeyHash: Promise<string | undefined> | undefined;
  let warnedNoScope = false;
  const pending = new Set<Promise<void>>();
  const report = (error: MemoryMiddlewareError) => reportMemoryFailure(error, logger, options.onError);

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
    if (key === undefined) return mayFetch ? fetchBundle(request, identity, query, signal) : undefined;
    const cached = cache!.get(key);
    if (cached !== undefined) return cached;
    // A tool-loop step never fetches again: it reuses the turn's bundle or injects nothing.
    if (!mayFetch) return undefined;
    // A cached fetch may serve other calls: it gets the deadline, not this call's abort signal.
    const loading = fetchBundle(request, identity, query, AbortSignal.timeout(contextTimeoutMs));
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
    return bundleCacheKey(identity, { apiUrl, apiKeyHash: hash }, mode, query);
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
            : describeError(error);
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
      const capture = untilAborted(storeTurn(client, identity, messages, response, deadline), deadline).catch(
        (error: unknown) => {
          report(
            new MemoryMiddlewareError(
              "memory_capture_failed",
              `turn not captured: ${describeError(error)}`,
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

function clientFrom(options: MemoryMiddlewareCoreOptions): MemoryMiddlewareClient {
  return new MemoryClient({
    ...options.clientOptions,
    ...(options.apiUrl === undefined ? {} : { baseUrl: options.apiUrl }),
    ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
  });
}

/** The constructor's identity fields, the ones a request's own fields override. */
function identityDefaults(options: MemoryMiddlewareCoreOptions): MemoryIdentity {
  return {
    ...(options.userId === undefined ? {} : { userId: options.userId }),
    ...(options.agentId === undefined ? {} : { agentId: options.agentId }),
    ...(options.sessionId === undefined ? {} : { sessionId: options.sessionId }),
    ...(options.scope === undefined ? {} : { scope: options.scope }),
    ...(options.mode === undefined ? {} : { mode: options.mode }),
  };
}

/**
 * A purge through any client of this process drops every bundle of this cache that may hold some
 * of the purged scope (no field set on both sides differs); a dropped bundle is only fetched again.
 */
function forgetPurgedBundles(cache: BundleCache<MemoryContextBundle>): void {
  onScopePurged(cache, (held, scope) =>
    held.forget((owner) =>
      MEMORY_SCOPE_VALUES.every((field) => {
        const value = (owner as MemoryIdentity)[field];
        return scope[field] === undefined || value === undefined || value === scope[field];
      }),
    ),
  );
}
