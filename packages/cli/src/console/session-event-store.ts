/**
 * The events a console session's streams sent, kept so a client that lost a stream resumes it with
 * `Last-Event-ID` (Streamable HTTP resumability, SEP-1699): per session, in memory, bounded (the
 * oldest go first), replaying only the lost stream's later events.
 */
import type { EventStore, JSONRPCMessage } from "@modelcontextprotocol/server";

export interface SessionEventStore extends EventStore {
  /** Events held now (for tests). */
  readonly size: number;
}

interface Kept {
  readonly streamId: string;
  readonly message: JSONRPCMessage;
}

/** Event ids are `<stream>_<n>`: `n` orders them; the stream is read back from the kept event. */
export function createSessionEventStore(maxEvents = 1_000): SessionEventStore {
  const events = new Map<string, Kept>();
  let next = 0;
  return {
    get size() {
      return events.size;
    },
    async storeEvent(streamId, message) {
      next += 1;
      const eventId = `${streamId}_${next}`;
      events.set(eventId, { streamId, message });
      while (events.size > maxEvents) events.delete(events.keys().next().value as string);
      return eventId;
    },
    async getStreamIdForEventId(eventId) {
      return events.get(eventId)?.streamId;
    },
    async replayEventsAfter(lastEventId, { send }) {
      const last = events.get(lastEventId);
      if (last === undefined) return "";
      let after = false;
      for (const [eventId, kept] of events) {
        if (eventId === lastEventId) {
          after = true;
          continue;
        }
        // A priming event holds no message ({}): nothing to send again.
        if (after && kept.streamId === last.streamId && "jsonrpc" in kept.message)
          await send(eventId, kept.message);
      }
      return last.streamId;
    },
  };
}
