/**
 * How many requests one caller may have in flight at once (ADR 0482): a caller's legal pushes, stages
 * and reads, sent by the thousand with bodies trickling in, would otherwise all be held by the server
 * at once. A caller is a credential on a document (the bearer token, which opens one document, or a
 * host credential, counted per document it works on); the admin credential's creates are one caller.
 * Two bounds each:
 *
 * - `maxInFlight` (default 64): every request but a waiting pull, from the moment its credential is
 *   checked (before its body is read) until it is answered.
 * - `maxWaitingPulls` (default 256): pulls that wait for the next push (`GET …/updates?waitMs=` > 0),
 *   counted apart: a waiting pull holds no body and costs nothing until a push wakes it, and it is how a
 *   client learns of others' pushes, so pushes filling the places must not refuse it, nor many
 *   followers of one document refuse its pushes.
 *
 * Past a bound the request is answered 429 `too_many_requests` with `Retry-After: 1`, its body unread.
 * A place is held until the request's answer has been sent, not only made (ADR 0552), and a caller
 * whose unsent answers hold `maxUnsentBytes` is refused likewise: an answer nobody reads stays in the
 * server's memory, so a flood of reads that are never read would otherwise cost it without bound.
 */
import { createPlaces, type Places } from "@tackle/core/internal";
import type { Context, MiddlewareHandler } from "hono";
import { hashToken } from "./document-host.ts";
import { waitMsOf } from "./request-input.ts";
import { bearer, problem } from "./route-access.ts";
import {
  defaultAnswerStallMs,
  defaultMaxUnsentBytes,
  type Outgoing,
  type UnsentAnswers,
  unsentAnswers,
} from "./unsent-answers.ts";

export const defaultMaxInFlight = 64;
export const defaultMaxWaitingPulls = 256;

/** What a refused caller is told to wait, in seconds. */
const retryAfterSeconds = 1;

export interface RequestPlaces {
  /** Every route of a document, after its guard: a place per credential and document, or 429. */
  readonly documents: MiddlewareHandler;
  /** `POST /documents`, after the admin token is checked: a place of the admin's, or 429. */
  readonly creates: MiddlewareHandler;
}

function refused(context: Context, message: string, data: Record<string, number>): Response {
  return context.json(
    problem("too_many_requests", `${message}; retry in ${retryAfterSeconds} s`, {
      ...data,
      retryAfterSeconds,
    }),
    429,
    { "retry-after": String(retryAfterSeconds) },
  );
}

/** The Node response the answer goes out on, when the server runs on `@hono/node-server`. */
function outgoingOf(context: Context): Outgoing | undefined {
  const env = context.env as { outgoing?: Outgoing } | undefined;
  return typeof env?.outgoing?.once === "function" ? env.outgoing : undefined;
}

interface Caller {
  readonly key: string;
  readonly pool: Places;
  readonly what: (max: number) => string;
}

/**
 * Holds a place of the caller while the rest of the request runs and until its answer is sent; 429
 * when there is none, or when the caller's unsent answers already hold `maxUnsentBytes`.
 */
async function inPlace(
  context: Context,
  next: () => Promise<void>,
  { key, pool, what }: Caller,
  unsent: { answers: UnsentAnswers; maxBytes: number },
): Promise<Response | undefined> {
  const place = pool.take(key);
  if (place === undefined) return refused(context, what(pool.max), { held: pool.held(key), max: pool.max });
  const tooMuch = unsentRefusal(context, key, unsent);
  if (tooMuch !== undefined) {
    place();
    return tooMuch;
  }
  let answered = false;
  try {
    await next();
    answered = true;
  } finally {
    // Failed, or its client gone (a body read fails, a waiting pull's signal aborts): back at once.
    if (!answered) place();
  }
  const outgoing = outgoingOf(context);
  // Served by `fetch` alone (no connection to watch), the place is back once the answer is made.
  if (outgoing === undefined) {
    place();
    return undefined;
  }
  // Reads made together (each let in while nothing was unsent yet) are refused once they are made
  // if the answers sent before them still fill the bound: a read changes nothing, so its answer can
  // be dropped and asked again. A push or a stage keeps its answer: its bytes may be stored.
  const late = context.req.method === "GET" ? unsentRefusal(context, key, unsent) : undefined;
  if (late !== undefined) {
    context.res = undefined;
    context.res = late;
  }
  unsent.answers.hold(key, outgoing, place);
  return undefined;
}

/** 429 when the caller's answers not yet sent hold `maxUnsentBytes` already. */
function unsentRefusal(
  context: Context,
  key: string,
  unsent: { answers: UnsentAnswers; maxBytes: number },
): Response | undefined {
  const unsentBytes = unsent.answers.bytes(key);
  if (unsentBytes < unsent.maxBytes) return undefined;
  return refused(
    context,
    `this credential's answers on this document not yet read hold ${unsentBytes} bytes (at most ${unsent.maxBytes})`,
    { unsentBytes, maxUnsentBytes: unsent.maxBytes },
  );
}

export function requestPlaces(options: {
  maxInFlight: number;
  maxWaitingPulls: number;
  maxUnsentBytes?: number;
  answerStallMs?: number;
}): RequestPlaces {
  const requests = createPlaces({ max: options.maxInFlight, name: "maxInFlight" });
  const waiting = createPlaces({ max: options.maxWaitingPulls, name: "maxWaitingPulls" });
  const unsent = {
    answers: unsentAnswers({ stallMs: options.answerStallMs ?? defaultAnswerStallMs }),
    maxBytes: options.maxUnsentBytes ?? defaultMaxUnsentBytes,
  };
  return {
    documents: async (context, next) => {
      const token = bearer(context.req.header("authorization")) ?? "";
      const caller = `${hashToken(token)}/${context.req.param("documentId")}`;
      const waits =
        context.req.method === "GET" &&
        context.req.path.endsWith("/updates") &&
        waitMsOf(context.req.query("waitMs")) > 0;
      const what = waits
        ? (max: number) => `${max} pulls of this credential wait on this document already`
        : (max: number) => `${max} requests of this credential are in flight on this document already`;
      return inPlace(context, next, { key: caller, pool: waits ? waiting : requests, what }, unsent);
    },
    creates: (context, next) =>
      inPlace(
        context,
        next,
        { key: "admin", pool: requests, what: (max) => `${max} creates are in flight already` },
        unsent,
      ),
  };
}
