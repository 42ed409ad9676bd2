/** Who a middleware call is for, and how it resolves: per request over the constructor's defaults. */
import { ownValue, setOwn } from "@tackle/core/internal";
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

/** The fields an identity has; nothing else is carried from a request or the defaults. */
const IDENTITY_FIELDS = ["userId", "agentId", "sessionId", "scope", "mode"] as const;

/**
 * Field by field, the request's value wins over the default; an absent field never erases one. Only
 * the identity's own fields are read, and set as own keys: a request parsed from JSON may carry an own
 * `__proto__` key, which assigning merged into the result's prototype (its fields then read through).
 */
export function resolveIdentity(
  defaults: MemoryIdentity,
  request: MemoryIdentity | undefined,
): MemoryIdentity {
  const merged: Record<string, unknown> = {};
  for (const field of IDENTITY_FIELDS) {
    const value = ownValue<unknown>(request as Record<string, unknown> | undefined, field);
    const chosen =
      value !== undefined && value !== ""
        ? value
        : ownValue<unknown>(defaults as Record<string, unknown>, field);
    if (chosen !== undefined) setOwn(merged, field, chosen);
  }
  return merged as MemoryIdentity;
}

/** A tenant discriminator is present: the cache has a boundary to key on. */
export function hasDiscriminator(identity: MemoryIdentity): boolean {
  return Boolean(identity.userId || identity.agentId || identity.sessionId);
}
