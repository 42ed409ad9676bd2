/**
 * The requests `tackle mcp` handles at once over stdio (ADR 0270): at most `maxInFlight` are handed to
 * the server; the rest wait in line in the order they came, at most `maxWaiting` of them (and 16 lines'
 * worth of bytes); past that a request is answered at once with JSON-RPC's -32000 and `data.code`
 * `overloaded`, retryable. A place comes back when the request's answer is sent, or when the client
 * cancels it (the SDK sends no answer to a cancelled request); a request cancelled while it waits
 * leaves the line and is never run. Notifications, the client's answers, `ping` and
 * `subscriptions/listen` (served at the entry, bounded by its own subscriptions) pass at once.
 */
import { isJSONRPCNotification, isJSONRPCRequest, type JSONRPCMessage } from "@modelcontextprotocol/server";
import { boundCount } from "../program/bound-count.ts";

/** Requests handled at once: the bound core's HTTP endpoint and the console put on a caller. */
export const defaultStdioMaxInFlight = 64;
/** Requests waiting for a place, in order; past them a request is refused `overloaded`. */
export const defaultStdioMaxWaiting = 1024;
/** Seconds a refused client is asked to wait before it sends again. */
const retryAfterSeconds = 1;
/** Methods that hold nothing: answered at once by the SDK, or served at its entry. */
const passing = new Set(["ping", "subscriptions/listen"]);

export interface StdioAdmissionOptions {
  /** Requests handed to the server at once. Default {@link defaultStdioMaxInFlight}. */
  readonly maxInFlight?: number;
  /** Requests waiting in line past it (0: none wait, each past the bound is refused). Default {@link defaultStdioMaxWaiting}. */
  readonly maxWaiting?: number;
}

interface Waiting {
  readonly key: string;
  readonly message: JSONRPCMessage;
  readonly bytes: number;
}

export interface StdioAdmission {
  /** An inbound message of `bytes`: handed on now, kept in line, or refused. */
  receive(message: JSONRPCMessage, bytes: number): void;
  /** An outbound message: the answer to a request gives its place back, and the next in line goes. */
  sent(message: JSONRPCMessage): void;
  /** Requests waiting in line now. */
  readonly waiting: number;
  /** Requests handed on and not yet answered. */
  readonly running: number;
  /** Drops the line (the connection is closing). */
  clear(): void;
}

export interface StdioAdmissionHooks {
  /** Hands a message to the server. */
  deliver(message: JSONRPCMessage): void;
  /** Answers a request with an error the server never saw. */
  refuse(id: string | number, code: number, message: string, data: Record<string, unknown>): void;
}

export function createStdioAdmission(
  options: StdioAdmissionOptions,
  maxLineBytes: number,
  hooks: StdioAdmissionHooks,
): StdioAdmission {
  const maxInFlight = boundCount("maxInFlight", options.maxInFlight, defaultStdioMaxInFlight);
  const maxWaiting = boundCount("maxWaiting", options.maxWaiting, defaultStdioMaxWaiting, 0);
  const maxWaitingBytes = 16 * maxLineBytes;
  /** The requests handed on, by id (a client may reuse an id; each use holds its own place). */
  const running = new Map<string, number>();
  let runningCount = 0;
  let line: Waiting[] = [];
  let lineBytes = 0;

  const start = (key: string, message: JSONRPCMessage) => {
    running.set(key, (running.get(key) ?? 0) + 1);
    runningCount += 1;
    hooks.deliver(message);
  };
  const finish = (key: string): boolean => {
    const count = running.get(key);
    if (count === undefined) return false;
    if (count <= 1) running.delete(key);
    else running.set(key, count - 1);
    runningCount -= 1;
    return true;
  };
  const next = () => {
    while (runningCount < maxInFlight && line.length > 0) {
      const first = line.shift() as Waiting;
      lineBytes -= first.bytes;
      start(first.key, first.message);
    }
  };
  /** A cancel of a request in line takes it out (true: nothing else to do); of a running one, frees its place. */
  const cancel = (requestId: unknown): boolean => {
    if (typeof requestId !== "string" && typeof requestId !== "number") return false;
    const key = keyOf(requestId);
    const index = line.findIndex((waiting) => waiting.key === key);
    if (index !== -1) {
      const [left] = line.splice(index, 1);
      lineBytes -= (left as Waiting).bytes;
      return true;
    }
    if (finish(key)) next();
    return false;
  };

  return {
    receive(message, bytes) {
      if (!isJSONRPCRequest(message) || passing.has(message.method)) {
        if (isJSONRPCNotification(message) && message.method === "notifications/cancelled") {
          if (cancel(message.params?.requestId)) return;
        }
        hooks.deliver(message);
        return;
      }
      const key = keyOf(message.id);
      if (runningCount < maxInFlight && line.length === 0) {
        start(key, message);
        return;
      }
      if (line.length >= maxWaiting || lineBytes + bytes > maxWaitingBytes) {
        hooks.refuse(
          message.id,
          -32000,
          `tackle mcp is handling ${maxInFlight} requests at once and holding ${line.length} more in line, its most; retry in ${retryAfterSeconds} s`,
          { code: "overloaded", retryable: true, retryAfterSeconds, maxInFlight, maxWaiting },
        );
        return;
      }
      line.push({ key, message, bytes });
      lineBytes += bytes;
    },
    sent(message) {
      if (!("id" in message) || "method" in message) return; // a request or a notification of the server's
      if (message.id === undefined || message.id === null) return;
      if (finish(keyOf(message.id))) next();
    },
    get waiting() {
      return line.length;
    },
    get running() {
      return runningCount;
    },
    clear() {
      line = [];
      lineBytes = 0;
    },
  };
}

/** A request id as a key: a number and the string of its digits are different ids. */
function keyOf(id: string | number): string {
  return `${typeof id}:${id}`;
}
