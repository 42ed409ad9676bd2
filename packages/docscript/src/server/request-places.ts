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
 */
import { createPlaces, type Places } from "@tackle/core/internal";
import type { Context, MiddlewareHandler } from "hono";
import { hashToken } from "./document-host.ts";
import { waitMsOf } from "./request-input.ts";
import { bearer, problem } from "./route-access.ts";

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

/** Holds a place of `caller` while the rest of the request runs; 429 when there is none. */
async function inPlace(
  context: Context,
  next: () => Promise<void>,
  pool: Places,
  caller: string,
  what: (max: number) => string,
): Promise<Response | undefined> {
  const place = pool.take(caller);
  if (place === undefined) {
    return context.json(
      problem("too_many_requests", `${what(pool.max)}; retry in ${retryAfterSeconds} s`, {
        held: pool.held(caller),
        max: pool.max,
        retryAfterSeconds,
      }),
      429,
      { "retry-after": String(retryAfterSeconds) },
    );
  }
  try {
    await next();
  } finally {
    // Answered, failed, or its client gone (a body read fails, a waiting pull's signal aborts).
    place();
  }
  return undefined;
}

export function requestPlaces(options: { maxInFlight: number; maxWaitingPulls: number }): RequestPlaces {
  const requests = createPlaces({ max: options.maxInFlight, name: "maxInFlight" });
  const waiting = createPlaces({ max: options.maxWaitingPulls, name: "maxWaitingPulls" });
  return {
    documents: async (context, next) => {
      const token = bearer(context.req.header("authorization")) ?? "";
      const caller = `${hashToken(token)}/${context.req.param("documentId")}`;
      const waits =
        context.req.method === "GET" &&
        context.req.path.endsWith("/updates") &&
        waitMsOf(context.req.query("waitMs")) > 0;
      return waits
        ? inPlace(
            context,
            next,
            waiting,
            caller,
            (max) => `${max} pulls of this credential wait on this document already`,
          )
        : inPlace(
            context,
            next,
            requests,
            caller,
            (max) => `${max} requests of this credential are in flight on this document already`,
          );
    },
    creates: (context, next) =>
      inPlace(context, next, requests, "admin", (max) => `${max} creates are in flight already`),
  };
}
