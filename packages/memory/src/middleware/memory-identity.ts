/** Who a middleware call is for, and how it resolves: per request over the constructor's defaults. */
import type { MemoryScopeField } from "../scope/memory-scope.ts";

/** `full` retrieves for the user's query; `wake-up` retrieves what matters with no query. */
export type MemoryContextMode = "full" | "wake-up";

export interface MemoryIdentity {
  readonly userId?: string | undefined;
  readonly agentId?: string | undefined;
  readonly sessionId?: string | undefined;
  /**
   * Which identity fields bound retrieval. Default: `userId` and `agentId` when given (so the user's
   * memories from every session count), else `sessionId`. Turns are captured with every field given.
   */
  readonly scope?: readonly MemoryScopeField[] | undefined;
  /** Forces a mode; by default `full` when the last user message has text, else `wake-up`. */
  readonly mode?: MemoryContextMode | undefined;
}

/** Field by field, the request's value wins over the default; an absent field never erases one. */
export function resolveIdentity(
  defaults: MemoryIdentity,
  request: MemoryIdentity | undefined,
): MemoryIdentity {
  const merged: Record<string, unknown> = { ...defaults };
  for (const [field, value] of Object.entries(request ?? {})) {
    if (value !== undefined && value !== "") merged[field] = value;
  }
  return merged as MemoryIdentity;
}

/** A tenant discriminator is present: the cache has a boundary to key on. */
export function hasDiscriminator(identity: MemoryIdentity): boolean {
  return Boolean(identity.userId || identity.agentId || identity.sessionId);
}
