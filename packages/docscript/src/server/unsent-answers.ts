/**
 * A caller's answers the server has made but not yet sent (ADR 0552). A snapshot, the updates since an
 * old version or a page is built whole and handed to the connection; a client that asks and never
 * reads leaves those bytes in the server's memory. The request's place (ADR 0482) is therefore held
 * until its answer has left for the network, not only until it is made, and a caller whose unsent
 * answers already hold `maxUnsentBytes` is refused before anything more is made for it. An answer
 * whose reader takes none of it for `stallMs` is dropped with its connection, so one stalled reader
 * cannot hold a token's places (which every client of its document shares) for good.
 */

/** The Node response an answer is written to (`@hono/node-server` passes it as `env.outgoing`). */
export interface Outgoing {
  readonly writableLength: number;
  readonly writableFinished: boolean;
  readonly destroyed: boolean;
  readonly socket?: {
    readonly destroyed?: boolean;
    readonly _handle?: { readonly writeQueueSize?: number } | null;
  } | null;
  once(event: "finish" | "close", listener: () => void): unknown;
  destroy(): void;
}

export const defaultMaxUnsentBytes = 64 * 1024 * 1024;
export const defaultAnswerStallMs = 60_000;

/** Bytes of an answer not yet taken by the network: what libuv still queues when it tells. */
function pendingBytes(outgoing: Outgoing): number {
  const queued = outgoing.socket?._handle?.writeQueueSize;
  return typeof queued === "number" ? Math.max(queued, 0) : outgoing.writableLength;
}

export interface UnsentAnswers {
  /** Bytes the caller's answers still hold in this process. */
  bytes(caller: string): number;
  /**
   * Holds `release` (the request's place) until `outgoing` has sent its answer or closed; an answer
   * that makes no progress for the stall time is dropped with its connection.
   */
  hold(caller: string, outgoing: Outgoing, release: () => void): void;
}

export function unsentAnswers(options: { stallMs: number }): UnsentAnswers {
  const byCaller = new Map<string, Set<Outgoing>>();
  return {
    bytes(caller) {
      let sum = 0;
      for (const outgoing of byCaller.get(caller) ?? []) sum += outgoing.writableLength;
      return sum;
    },
    hold(caller, outgoing, release) {
      // Its client gone while the answer was made (its `close` already fired): nothing will be sent.
      if (
        outgoing.destroyed ||
        outgoing.writableFinished ||
        outgoing.socket == null ||
        outgoing.socket.destroyed
      ) {
        release();
        return;
      }
      let held = byCaller.get(caller);
      if (held === undefined) {
        held = new Set();
        byCaller.set(caller, held);
      }
      held.add(outgoing);
      let last = Number.POSITIVE_INFINITY;
      const watch = setInterval(() => {
        const pending = pendingBytes(outgoing);
        if (pending > 0 && pending >= last) outgoing.destroy();
        last = pending;
      }, options.stallMs);
      watch.unref();
      let done = false;
      const sent = () => {
        if (done) return;
        done = true;
        clearInterval(watch);
        const set = byCaller.get(caller);
        set?.delete(outgoing);
        if (set?.size === 0) byCaller.delete(caller);
        release();
      };
      // `finish`: the last byte handed to the system; `close`: that, or the connection gone.
      outgoing.once("finish", sent);
      outgoing.once("close", sent);
    },
  };
}
