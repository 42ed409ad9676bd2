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

export interface Requester {
  /** Publishes the request; `reply` settles once, with the reply or an error. */
  start(
    subject: string,
    body: Uint8Array,
    headers: MsgHdrs,
    timeoutMs: number,
  ): { readonly token: string; readonly reply: Promise<Msg | Error> };
  /** Settles one request now (a cancel), if it is still waiting. */
  settle(token: string, error: Error): void;
  /** Settles every waiting request with `error` (the connection dropped or closed). */
  failAll(error: Error): void;
  /** A publish the server refused: the oldest request to that subject fails with it, as in nats.js. */
  refused(error: PermissionViolationError): void;
  close(): void;
}

const maxTimerMs = 2 ** 31 - 1;

interface Waiting {
  readonly subject: string;
  readonly resolve: (value: Msg | Error) => void;
  readonly timer: NodeJS.Timeout | undefined;
}

export function createRequester(connection: NatsConnection): Requester {
  const waiting = new Map<string, Waiting>();
  let counter = 0;
  let inbox: string | undefined;
  let subscription: { unsubscribe(): void } | undefined;

  function settle(token: string, value: Msg | Error): void {
    const entry = waiting.get(token);
    if (entry === undefined) return;
    waiting.delete(token);
    clearTimeout(entry.timer);
    entry.resolve(value);
  }

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
          for (const token of [...waiting.keys()]) settle(token, error);
          return;
        }
        const token = message.subject.slice(prefix.length);
        const entry = waiting.get(token);
        if (entry === undefined) return;
        settle(
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
    start(subject, body, headers, timeoutMs) {
      counter = (counter + 1) % Number.MAX_SAFE_INTEGER;
      const token = counter.toString(36);
      let resolve: (value: Msg | Error) => void = () => {};
      const reply = new Promise<Msg | Error>((done) => {
        resolve = done;
      });
      // No limit past what a timer can hold (an unlimited call's bus wait).
      const timer =
        timeoutMs <= maxTimerMs ? setTimeout(() => settle(token, new TimeoutError()), timeoutMs) : undefined;
      waiting.set(token, { subject, resolve, timer });
      try {
        connection.publish(subject, body, { reply: `${replyPrefix()}${token}`, headers });
      } catch (error) {
        settle(token, error instanceof Error ? error : new Error(String(error)));
      }
      return { token, reply };
    },
    settle,
    failAll(error) {
      for (const token of [...waiting.keys()]) settle(token, error);
    },
    refused(error) {
      if (error.operation !== "publish") return;
      for (const [token, entry] of waiting) {
        if (entry.subject === error.subject) return settle(token, error);
      }
    },
    close() {
      subscription?.unsubscribe();
      subscription = undefined;
      inbox = undefined;
    },
  };
}
