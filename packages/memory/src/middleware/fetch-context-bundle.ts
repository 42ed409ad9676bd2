/**
 * The inject half's requests: which identity fields bound retrieval, the context-bundle request
 * itself, and the cache key a bundle is held under.
 */
import { MEMORY_SCOPE_VALUES, type MemoryScopeField } from "../scope/memory-scope.ts";
import { cacheIdentityKey } from "./cache/cache-identity.ts";
import type { MemoryContextBundle } from "./memory-context-bundle.ts";
import type { MemoryIdentity } from "./memory-identity.ts";
import type { MemoryMiddlewareClient } from "./memory-middleware-client.ts";
import { toMemoryContextBundle } from "./to-memory-context-bundle.ts";

export interface BundleRequestOptions {
  readonly client: MemoryMiddlewareClient;
  readonly contextTimeoutMs: number;
  readonly bundle?: {
    readonly tokenBudget?: number;
    readonly maxMemories?: number;
    readonly maxEvents?: number;
  };
}

/** The fetch runs under its own deadline (shared through the cache); each caller waits at most that long. */
export async function fetchBundle(
  options: BundleRequestOptions,
  identity: MemoryIdentity,
  query: string | undefined,
  signal: AbortSignal,
): Promise<MemoryContextBundle> {
  const request: Record<string, unknown> = { ...options.bundle };
  for (const field of retrievalFields(identity)) request[field] = identity[field];
  if (query !== undefined) request.query = query.slice(-2000);
  return toMemoryContextBundle(
    await options.client.contextBundle(request, { signal, timeoutMs: options.contextTimeoutMs }),
  );
}

/** The key a bundle is cached under: everything that decides what the service would answer. */
export function bundleCacheKey(
  identity: MemoryIdentity,
  where: { readonly apiUrl: string; readonly apiKeyHash: string },
  mode: "full" | "wake-up",
  query: string | undefined,
): Promise<string | undefined> {
  return cacheIdentityKey({
    agentId: identity.agentId,
    apiUrl: where.apiUrl,
    apiKeyHash: where.apiKeyHash,
    mode,
    scope: retrievalFields(identity),
    sessionId: identity.sessionId,
    userId: identity.userId,
    query,
  });
}

/**
 * The identity fields that bound retrieval. Scope is an AND, and memories learned in one session
 * belong to the user, so by default the session narrows retrieval only when nothing else names
 * whose memory it is; `identity.scope` overrides this.
 */
export function retrievalFields(identity: MemoryIdentity): MemoryScopeField[] {
  const given = MEMORY_SCOPE_VALUES.filter((field) => identity[field] !== undefined);
  if (identity.scope !== undefined) return given.filter((field) => identity.scope!.includes(field));
  const owners = given.filter((field) => field !== "sessionId");
  return owners.length > 0 ? owners : given;
}
