/**
 * Request/reply for tool calls over one reply subscription (`<inbox>.*`), as nats.js's own muxed
 * request does, without its per-request costs: nats.js builds a `RequestError` (with its stack trace)
 * every time a request completes, even a successful one, and chains a deferred and a timer object per
 * request. A request here settles with the reply or with the error nats.js would have given (no
 * responders, timeout, a permission violation on publish), never by rejecting.
 */
import {
  createInbox,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  NoRespondersError,
  type PermissionViolationError,
  TimeoutError,
} from "@nats-io/transport-node";
import type { CallInFlight } from "./node-watch.ts";

export interface Requester {
  /**
   * Publishes the request; `reply` settles once, with the reply or an error. A tool call names its
   * module's prefix, its call id and its name, for the node watch (`inFlight`).
   */
  start(
    subject: string,
    body: Uint8Array,
    headers: MsgHdrs,
    timeoutMs: number,
    call?: { readonly prefix: string; readonly callId: string; readonly name: string },
  ): { readonly token: string; readonly reply: Promise<Msg | Error> };
  /** The requests waiting now. */
  inFlight(): Iterable<CallInFlight>;
  isWaiting(token: string): boolean;
  /** Settles one request now (a cancel), if it is still waiting. */
  settle(token: string, error: Error): void;
  /** Settles every waiting request with `error` (the connection dropped or closed). */
  failAll(error: Error): void;
  /**
   * The connection dropped: tool calls keep waiting, marked suspended, for the node watch to learn
   * their fate once it is back (ADR 0208); any other request fails with `error`.
   */
  suspendAll(error: Error): void;
  /** A publish the server refused: the oldest request to that subject fails with it, as in nats.js. */
  refused(error: PermissionViolationError): void;
  close(): void;
}

const maxTimerMs = 2 ** 31 - 1;

interface Waiting extends CallInFlight {
  readonly subject: string;
  readonly resolve: (value: Msg | Error) => void;
  suspended: boolean;
}

export interface RequesterOptions {
  /** What a suspended call (in flight across a dropped connection) fails with at its deadline. */
  readonly suspendedDeadline?: (call: CallInFlight) => Error;
}

/**
 * The deadlines of one time limit. Requests with the same limit expire in the order they started, so
 * one timer per limit serves them all (armed for the oldest deadline still waiting) instead of a timer
 * object per request.
 */
interface Lane {
  readonly ms: number;
  queue: { readonly token: string; readonly at: number }[];
  head: number;
  timer: NodeJS.Timeout | undefined;
}

/** The requests waiting for their replies, and their deadlines by time limit. */
interface Pending {
  readonly waiting: Map<string, Waiting>;
  readonly lanes: Map<number, Lane>;
  readonly options: RequesterOptions;
}

function settle(pending: Pending, token: string, value: Msg | Error): void {
  const entry = pending.waiting.get(token);
  if (entry === undefined) return;
  pending.waiting.delete(token);
  entry.resolve(value);
}

function expire(pending: Pending, lane: Lane): void {
  const { waiting, options } = pending;
  lane.timer = undefined;
  const now = performance.now();
  while (lane.head < lane.queue.length) {
    const next = lane.queue[lane.head] as Lane["queue"][number];
    const entry = waiting.get(next.token);
    if (entry !== undefined) {
      if (next.at > now) break;
      settle(
        pending,
        next.token,
        entry.suspended && options.suspendedDeadline !== undefined
          ? options.suspendedDeadline(entry)
          : new TimeoutError(),
      );
    }
    lane.head += 1;
  }
  arm(pending, lane);
}

/** Drops what has settled from the front, and arms the lane's timer for the oldest request left. */
function arm(pending: Pending, lane: Lane): void {
  const { waiting, lanes } = pending;
  while (
    lane.head < lane.queue.length &&
    !waiting.has((lane.queue[lane.head] as Lane["queue"][number]).token)
  )
    lane.head += 1;
  // A long call at the front keeps the settled ones behind it: compact once they outnumber it.
  if (lane.head > 1024 || lane.queue.length - lane.head > 2 * waiting.size + 1024) {
    lane.queue = lane.queue.slice(lane.head).filter((entry) => waiting.has(entry.token));
    lane.head = 0;
  }
  const next = lane.queue[lane.head];
  if (next === undefined) {
    lanes.delete(lane.ms);
    return;
  }
  if (lane.timer === undefined) {
    lane.timer = setTimeout(() => expire(pending, lane), Math.max(0, Math.ceil(next.at - performance.now())));
    // The connection keeps the process alive while a request waits; a lane's timer alone must not.
    lane.timer.unref();
  }
}

function track(pending: Pending, token: string, timeoutMs: number, now: number): void {
  const { waiting, lanes } = pending;
  // No limit past what a timer can hold (an unlimited call's bus wait).
  if (!(timeoutMs <= maxTimerMs)) return;
  let lane = lanes.get(timeoutMs);
  if (lane === undefined) {
    lane = { ms: timeoutMs, queue: [], head: 0, timer: undefined };
    lanes.set(timeoutMs, lane);
  }
  lane.queue.push({ token, at: now + timeoutMs });
  if (lane.timer === undefined || lane.queue.length - lane.head > 2 * waiting.size + 1024) arm(pending, lane);
}

export function createRequester(connection: NatsConnection, options: RequesterOptions = {}): Requester {
  const pending: Pending = { waiting: new Map(), lanes: new Map(), options };
  const { waiting, lanes } = pending;
  let counter = 0;
  let inbox: string | undefined;
  let subscription: { unsubscribe(): void } | undefined;
  const settleOne = (token: string, value: Msg | Error) => settle(pending, token, value);

  function replyPrefix(): string {
    if (inbox !== undefined) return inbox;
    const prefix = `${createInbox((connection as { options?: { inboxPrefix?: string } }).options?.inboxPrefix)}.`;
    inbox = prefix;
    subscription = connection.subscribe(`${prefix}*`, {
      callback: (error, message) => {
        if (error !== null) {
          // The reply subscription itself was refused or closed: every request waiting on it fails,
          // and the next request subscribes again.
          if (inbox === prefix) inbox = undefined;
          for (const token of [...waiting.keys()]) settleOne(token, error);
          return;
        }
        const token = message.subject.slice(prefix.length);
        const entry = waiting.get(token);
        if (entry === undefined) return;
        settleOne(
          token,
          message.data.length === 0 && message.headers?.code === 503
            ? new NoRespondersError(entry.subject)
            : message,
        );
      },
    });
    return prefix;
  }

  return {
    start(subject, body, headers, timeoutMs, call) {
      counter = (counter + 1) % Number.MAX_SAFE_INTEGER;
      const token = counter.toString(36);
      let resolve: (value: Msg | Error) => void = () => {};
      const answer = new Promise<Msg | Error>((done) => {
        resolve = done;
      });
      const sentAt = performance.now();
      const reply = `${replyPrefix()}${token}`;
      waiting.set(token, {
        token,
        subject,
        resolve,
        prefix: call?.prefix,
        callId: call?.callId ?? token,
        name: call?.name ?? subject,
        reply,
        sentAt,
        suspended: false,
      });
      track(pending, token, timeoutMs, sentAt);
      try {
        connection.publish(subject, body, { reply, headers });
      } catch (error) {
        settleOne(token, error instanceof Error ? error : new Error(String(error)));
      }
      return { token, reply: answer };
    },
    settle: settleOne,
    inFlight: () => waiting.values(),
    isWaiting: (token) => waiting.has(token),
    failAll(error) {
      for (const token of [...waiting.keys()]) settleOne(token, error);
    },
    suspendAll(error) {
      for (const [token, entry] of [...waiting]) {
        if (entry.prefix === undefined) settleOne(token, error);
        else entry.suspended = true;
      }
    },
    refused(error) {
      if (error.operation !== "publish") return;
      for (const [token, entry] of waiting) {
        if (entry.subject === error.subject) return settleOne(token, error);
      }
    },
    close() {
      for (const lane of lanes.values()) clearTimeout(lane.timer);
      lanes.clear();
      subscription?.unsubscribe();
      subscription = undefined;
      inbox = undefined;
    },
  };
}
