/**
 * A call's progress reports and log lines, carried across NATS only when the caller asks.
 *
 * The caller subscribes to an inbox of its own and names it in `Tackle-Events`; `Tackle-Progress: 1`
 * asks for progress reports, `Tackle-Log-Level: <level>` for log lines at or above that level. The
 * node publishes each as a small JSON message to that inbox while the tool runs, in order, before its
 * reply; the caller drops the subscription when the reply (or its deadline, or its abort) comes. A
 * call without `Tackle-Events` costs nothing more than before.
 *
 * Bounded per call: at most {@link eventLimits}.perCall messages, at most `perSecond` a second once
 * a burst of `burst` is spent, each at most `bytes` long (a longer log line loses its fields, then
 * its text is cut); what is over is dropped and counted, and one `dropped` message says how many.
 */
import { createInbox, type MsgHdrs, type NatsConnection } from "@nats-io/transport-node";
import type { Logger, ToolProgress } from "@tackle/core";
import { EVENTS_VERB } from "../credentials/permissions.ts";

export const eventsHeader = "Tackle-Events";
export const progressHeader = "Tackle-Progress";
export const logLevelHeader = "Tackle-Log-Level";

/** The tool logger's levels, least severe first. */
export const eventLogLevels = ["debug", "info", "warn", "error"] as const;
export type EventLogLevel = (typeof eventLogLevels)[number];

export const eventLimits = Object.freeze({
  /** Messages per call, progress and log lines together. */
  perCall: 1000,
  /** Messages a second once the burst is spent. */
  perSecond: 50,
  burst: 100,
  /** Bytes of one message's JSON. */
  bytes: 8 * 1024,
});

/** What crosses the wire: one JSON object per message, `seq` counting from 1. */
export type CallEvent =
  | {
      readonly seq: number;
      readonly type: "progress";
      readonly progress: number;
      readonly total?: number;
      readonly message?: string;
    }
  | {
      readonly seq: number;
      readonly type: "log";
      readonly level: EventLogLevel;
      readonly message: string;
      readonly fields?: Record<string, unknown>;
    }
  | { readonly seq: number; readonly type: "dropped"; readonly count: number };

/** One event before it is numbered. */
type EventBody = CallEvent extends infer Event
  ? Event extends CallEvent
    ? Omit<Event, "seq">
    : never
  : never;

export interface CallEventsRequest {
  readonly onProgress?: (update: ToolProgress) => void;
  /** Receives the tool's log lines at or above `logLevel`. */
  readonly logger?: Logger;
  /** The least severe level wanted; without it no log line crosses. */
  readonly logLevel?: EventLogLevel;
}

export interface CallEventsSubscription {
  close(): void;
}

/**
 * The caller's side: when `request` asks for progress or log lines, subscribes to an inbox, names it
 * in `callHeaders` and hands each message on as it comes; otherwise does nothing and returns undefined.
 */
export function listenForCallEvents(
  connection: NatsConnection,
  callHeaders: MsgHdrs,
  request: CallEventsRequest,
  /** The called module's subject prefix. */
  modulePrefix?: string,
): CallEventsSubscription | undefined {
  const { onProgress, logger } = request;
  const logLevel = logger === undefined ? undefined : request.logLevel;
  if (onProgress === undefined && logLevel === undefined) return undefined;
  // Under the connection's own inbox prefix, which a credential already lets it subscribe to; a
  // Tackle-issued credential (its own `_INBOX_…` prefix) listens on the module's events subject instead,
  // the only place its nodes may publish events (ADR 0209).
  const prefix = (connection as { readonly options?: { readonly inboxPrefix?: string } }).options
    ?.inboxPrefix;
  const inbox =
    modulePrefix !== undefined && prefix?.startsWith("_INBOX_") === true
      ? createInbox(`${modulePrefix}.${EVENTS_VERB}.${prefix}`)
      : createInbox(prefix);
  const subscription = connection.subscribe(inbox, {
    callback: (error, message) => {
      if (error !== null) return;
      let event: CallEvent;
      try {
        event = message.json<CallEvent>();
      } catch {
        return;
      }
      deliver(event, onProgress, logLevel === undefined ? undefined : logger);
    },
  });
  callHeaders.set(eventsHeader, inbox);
  if (onProgress !== undefined) callHeaders.set(progressHeader, "1");
  if (logLevel !== undefined) callHeaders.set(logLevelHeader, logLevel);
  return { close: () => subscription.unsubscribe() };
}

function deliver(
  event: CallEvent,
  onProgress: ((update: ToolProgress) => void) | undefined,
  logger: Logger | undefined,
): void {
  if (event.type === "progress" && typeof event.progress === "number") {
    onProgress?.({
      progress: event.progress,
      ...(typeof event.total === "number" ? { total: event.total } : {}),
      ...(typeof event.message === "string" ? { message: event.message } : {}),
    });
  } else if (event.type === "log" && logger !== undefined && eventLogLevels.includes(event.level)) {
    logger[event.level](String(event.message), isRecord(event.fields) ? event.fields : undefined);
  } else if (event.type === "dropped" && logger !== undefined) {
    logger.warn(
      `${event.count} progress and log messages of this call were dropped on the node (at most ${eventLimits.perCall} a call, ${eventLimits.perSecond} a second after a burst of ${eventLimits.burst})`,
      { dropped: event.count },
    );
  }
}

export interface CallEventsPublisher {
  /** Progress wanted: hands each report on. */
  readonly onProgress?: (update: ToolProgress) => void;
  /** Writes to the node's own logger and, at or above the caller's level, to the caller. */
  readonly logger?: Logger;
  /** Says how many messages were dropped, if any; call before replying. */
  finish(): void;
}

/**
 * The node's side: what to give the tool when the request names an events inbox; undefined when it
 * does not (the plain call, unchanged).
 */
export function publishCallEvents(
  connection: NatsConnection,
  requestHeaders: MsgHdrs | undefined,
  nodeLogger: Logger,
  /** The request's reply subject: the events inbox must be an inbox beside it. */
  reply?: string,
  /** The module's subject prefix: its events subject for this caller is also accepted. */
  modulePrefix?: string,
): CallEventsPublisher | undefined {
  const inbox = requestHeaders?.get(eventsHeader);
  if (inbox === undefined || inbox === "") return undefined;
  if (!isInboxBeside(inbox, reply) && !isModuleEventsOf(inbox, reply, modulePrefix)) {
    // The node publishes with its own credential: a caller naming another module's tool or seat
    // subject here would have the node send to it what its own credential may not.
    nodeLogger.warn("call events refused: the events subject is not an inbox beside the reply", {
      events: inbox,
      ...(reply === undefined ? {} : { reply }),
    });
    return undefined;
  }
  const wantsProgress = requestHeaders?.get(progressHeader) === "1";
  const level = requestHeaders?.get(logLevelHeader) as EventLogLevel | undefined;
  const minimum = level === undefined ? -1 : eventLogLevels.indexOf(level);
  let seq = 0;
  let sent = 0;
  let dropped = 0;
  let tokens: number = eventLimits.burst;
  let refilledAt = Date.now();
  const encoder = new TextEncoder();
  const send = (event: EventBody, exempt = false): void => {
    if (!exempt) {
      const now = Date.now();
      tokens = Math.min(eventLimits.burst, tokens + ((now - refilledAt) / 1000) * eventLimits.perSecond);
      refilledAt = now;
      if (sent >= eventLimits.perCall || tokens < 1) {
        dropped += 1;
        return;
      }
      tokens -= 1;
      sent += 1;
    }
    seq += 1;
    try {
      connection.publish(inbox, encoder.encode(JSON.stringify({ seq, ...boundedEvent(event) })));
    } catch {
      // A closed connection (the reply cannot go either; the caller's deadline says so), or nothing
      // in the event could be encoded: a report is never worth failing the tool for.
    }
  };
  const forward =
    (logLevel: EventLogLevel) =>
    (message: string, fields?: Record<string, unknown>): void => {
      nodeLogger[logLevel](message, fields);
      if (minimum >= 0 && eventLogLevels.indexOf(logLevel) >= minimum)
        send({ type: "log", level: logLevel, message, ...(fields === undefined ? {} : { fields }) });
    };
  return {
    ...(wantsProgress ? { onProgress: (update: ToolProgress) => send({ type: "progress", ...update }) } : {}),
    ...(minimum >= 0
      ? {
          logger: {
            debug: forward("debug"),
            info: forward("info"),
            warn: forward("warn"),
            error: forward("error"),
          },
        }
      : {}),
    finish() {
      if (dropped > 0) send({ type: "dropped", count: dropped }, true);
      dropped = 0;
    },
  };
}

/** Keeps one message under the byte limit: a log line loses its fields first, then its text is cut. */
function boundedEvent(event: EventBody): EventBody {
  const limit = eventLimits.bytes - 64;
  const fits = (value: unknown) => {
    try {
      return Buffer.byteLength(JSON.stringify(value)) <= limit;
    } catch {
      // Fields that are not JSON (a cycle, a bigint) are left behind like oversized ones.
      return false;
    }
  };
  if (fits(event)) return event;
  // Even at 6 bytes a character (a JSON escape), this much text fits.
  const cut = (text: string) =>
    `${text.slice(0, Math.floor(limit / 8))}… (cut to fit ${eventLimits.bytes} bytes)`;
  if (event.type === "log") {
    const { fields: _fields, ...rest } = event;
    const withoutFields = { ...rest, fields: { truncated: true } };
    return fits(withoutFields) ? withoutFields : { ...withoutFields, message: cut(event.message) };
  }
  if (event.type === "progress" && event.message !== undefined)
    return { ...event, message: cut(event.message) };
  return event;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * True when `subject` is an inbox (`_INBOX…`, NATS's convention, with a custom prefix's first token) under the
 * same first token as the request's reply subject, and a plain subject (no wildcard, no empty token).
 */
export function isInboxBeside(subject: string, reply: string | undefined): boolean {
  if (reply === undefined) return false;
  const tokens = subject.split(".");
  const [root] = tokens;
  if (root === undefined || !root.startsWith("_INBOX") || tokens.length < 2) return false;
  if (tokens.some((token) => token === "" || token === "*" || token === ">" || /\s/.test(token)))
    return false;
  return reply.split(".")[0] === root;
}

/**
 * True when `subject` is the module's events subject for the request's caller:
 * `<prefix>.tools.events.<the reply's first token>.<token>` (ADR 0209).
 */
export function isModuleEventsOf(
  subject: string,
  reply: string | undefined,
  modulePrefix: string | undefined,
): boolean {
  if (reply === undefined || modulePrefix === undefined) return false;
  const root = reply.split(".")[0];
  if (root === undefined || !root.startsWith("_INBOX")) return false;
  const base = `${modulePrefix}.${EVENTS_VERB}.${root}.`;
  if (!subject.startsWith(base)) return false;
  const rest = subject.slice(base.length).split(".");
  return rest.every((token) => token !== "" && token !== "*" && token !== ">" && !/\s/.test(token));
}
