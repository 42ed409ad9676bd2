/**
 * The oracle of `console-sessions.property.test.ts`: the 2025 sessions the console must hold, least
 * recently used first (as the console's own table orders them), and the ids it must no longer know.
 * It is checked against the console's count after every step: the console may hold fewer only by
 * dropping the least recently used sessions that were idle past `idleMs` (the sweep), never more.
 */
import assert from "node:assert/strict";
import type { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

export interface HeldSession {
  readonly id: string;
  readonly client: Client;
  readonly transport: StreamableHTTPClientTransport;
  /** When the last request that reached it was sent (the console's `lastUsed` is no earlier). */
  sentAt: number;
}

export type GoneWhy = "deleted" | "evicted" | "expired";

export interface SessionOracle {
  /** Sessions the console must hold, least recently used first. */
  readonly live: readonly HeldSession[];
  /** Ids the console held once and must answer 404 for now. */
  readonly gone: ReadonlyMap<string, GoneWhy>;
  /** A session the console just opened: the least recently used goes when the table is full. */
  opened(session: HeldSession): void;
  /** A request sent at `sentAt` reached `session`: it is the most recently used now. */
  touched(session: HeldSession, sentAt: number): void;
  /** The session is no longer held: the client deleted it, or it was found expired. */
  ended(session: HeldSession, why: GoneWhy): void;
  /**
   * Reconciles with the console's count: past the bound or above the oracle fails (a session kept past
   * its end); below it, the least recently used are taken as expired, each checked idle long enough.
   */
  sync(consoleCount: number, where: string): void;
  /** A request to `session` answered 404: only an expired session may, and it is gone now. */
  notFound(session: HeldSession, where: string): void;
}

export function createSessionOracle(options: {
  readonly max: number;
  readonly idleMs: number;
  /** Called for every session the oracle lets go (its client is closed there). */
  readonly retire: (session: HeldSession) => void;
}): SessionOracle {
  const live: HeldSession[] = [];
  const gone = new Map<string, GoneWhy>();
  const remove = (session: HeldSession, why: GoneWhy) => {
    const index = live.indexOf(session);
    if (index >= 0) live.splice(index, 1);
    gone.set(session.id, why);
    options.retire(session);
  };
  const checkIdle = (session: HeldSession, where: string) => {
    const idle = Date.now() - session.sentAt;
    assert.ok(
      idle >= options.idleMs,
      `session ${session.id} went after ${idle} ms idle, before its ${options.idleMs} ms, though it was neither deleted nor the least recently used at a full table (${where})`,
    );
  };
  return {
    live,
    gone,
    opened(session) {
      assert.ok(!gone.has(session.id), `a new session got the id of an ended one: ${session.id}`);
      assert.ok(!live.some((held) => held.id === session.id), `two live sessions share ${session.id}`);
      while (live.length >= options.max) remove(live[0] as HeldSession, "evicted");
      live.push(session);
    },
    touched(session, sentAt) {
      const index = live.indexOf(session);
      if (index < 0) return;
      live.splice(index, 1);
      live.push(session);
      session.sentAt = sentAt;
    },
    ended: remove,
    sync(consoleCount, where) {
      assert.ok(
        consoleCount <= options.max,
        `the console holds ${consoleCount} sessions, past its ${options.max} (${where})`,
      );
      assert.ok(
        consoleCount <= live.length,
        `the console holds ${consoleCount} sessions, the oracle ${live.length}: one was kept past its end (${where})`,
      );
      while (live.length > consoleCount) {
        const oldest = live[0] as HeldSession;
        checkIdle(oldest, where);
        remove(oldest, "expired");
      }
    },
    notFound(session, where) {
      assert.ok(live.includes(session), `a 404 for a session the oracle had let go (${where})`);
      checkIdle(session, where);
      remove(session, "expired");
    },
  };
}
