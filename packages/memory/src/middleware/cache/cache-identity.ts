/**
 * `cacheIdentityKey`: the context-bundle cache key, a full SHA-256 over the ordered identity tuple.
 * The API key enters only as its own SHA-256, so the raw key never sits in the cache.
 */
import type { MemoryContextMode } from "../memory-identity.ts";
import { sha256Hex } from "./sha256-hex.ts";

export interface CacheIdentity {
  readonly agentId: string | undefined;
  readonly apiUrl: string;
  readonly apiKeyHash: string;
  readonly mode: MemoryContextMode;
  readonly scope: readonly string[];
  readonly sessionId: string | undefined;
  readonly userId: string | undefined;
  readonly query: string | undefined;
}

/** Undefined when WebCrypto is missing: the caller bypasses the cache. */
export function cacheIdentityKey(identity: CacheIdentity): Promise<string | undefined> {
  // A JSON array keeps order and separates fields unambiguously; null marks an absent field.
  return sha256Hex(
    JSON.stringify([
      identity.agentId ?? null,
      identity.apiUrl,
      identity.apiKeyHash,
      identity.mode,
      identity.scope,
      identity.sessionId ?? null,
      identity.userId ?? null,
      identity.query ?? null,
    ]),
  );
}
