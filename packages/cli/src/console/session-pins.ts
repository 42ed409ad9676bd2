/**
 * The places a 2025 session's calls hold until they are answered (ADR 0270). On a session a client
 * that drops its POST's stream has not cancelled the call (it may read the answer later with
 * `Last-Event-ID`), so the call runs on: its place stays pinned until the session's transport sends
 * its answer, the client cancels it, or the session closes. A cancelled call gets no answer, and the
 * SDK's 2025 client keeps reading its POST's stream: that idle stream keeps a stream's place if one
 * is free, and is ended otherwise, so no cancel leaves a request's place held.
 */
import type { JSONRPCMessage } from "@modelcontextprotocol/server";
import type { Place } from "./request-bounds.ts";

export interface SessionPins {
  /** A message a client posted in `place`: a request pins it until its answer. */
  posted(message: unknown, place: Place): void;
  /** A message the session's server sends: an answer unpins its request's place. */
  sent(message: JSONRPCMessage): void;
  /** The session closed: every place comes back. */
  clear(): void;
  /** Calls posted and not yet answered nor cancelled: while any runs, the session is in use. */
  readonly pending: number;
}

export function createSessionPins(): SessionPins {
  const pinned = new Map<string, { readonly place: Place; readonly unpin: () => void }[]>();
  /** The first pin of request `id`, taken off. */
  const take = (id: unknown) => {
    if (typeof id !== "string" && typeof id !== "number") return undefined;
    const key = `${typeof id}:${id}`;
    const pins = pinned.get(key);
    const first = pins?.shift();
    if (pins?.length === 0) pinned.delete(key);
    return first;
  };
  return {
    posted(message, place) {
      if (typeof message !== "object" || message === null || Array.isArray(message)) return;
      const { id, method, params } = message as { id?: unknown; method?: unknown; params?: unknown };
      if (method === "notifications/cancelled") {
        const cancelled = take((params as { requestId?: unknown } | undefined)?.requestId);
        if (cancelled === undefined) return;
        if (!cancelled.place.moveTo("stream")) cancelled.place.end();
        cancelled.unpin();
        return;
      }
      if (typeof method !== "string" || (typeof id !== "string" && typeof id !== "number")) return;
      const key = `${typeof id}:${id}`;
      pinned.set(key, [...(pinned.get(key) ?? []), { place, unpin: place.pin() }]);
    },
    sent(message) {
      if ("id" in message && !("method" in message)) take(message.id)?.unpin();
    },
    clear() {
      for (const pins of pinned.values()) for (const { unpin } of pins) unpin();
      pinned.clear();
    },
    get pending() {
      return pinned.size;
    },
  };
}
