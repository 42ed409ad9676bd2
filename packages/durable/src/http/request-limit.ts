/**
 * How many requests one tenant may have in flight at once through the HTTP API (ADR 0118): a caller's
 * legal requests, sent by the thousand with bodies trickling in, would otherwise all be held by the
 * server at once. Two bounds, each per tenant (the whole API one tenant without `authenticate`):
 *
 * - `maxInFlight` (default 64): every request but an event stream, from the moment its tenant is known
 *   (before its body is read) until its handler has answered.
 * - `maxStreams` (default 128): the event streams (`GET /runs/:id/frames`,
 *   `GET /ag-ui/threads/:id/events`, and the stream `POST /ag-ui/:graph` answers with), until the stream
 *   ends or its client goes. A stream waits on a run for as long as it drives, so it neither takes a
 *   request's place nor is refused because the requests' places are taken. The AG-UI POST carries a
 *   body too, so it holds a request's place while its handler runs as well.
 *
 * Past a bound the request is refused `too_many_requests` (429, retryable, `Retry-After: 1`).
 */
import { createPlaces } from "@tackle/core/internal";
import type { Context, Hono, MiddlewareHandler } from "hono";
import { DurableError } from "../errors/durable-error.ts";

export const defaultMaxInFlight = 64;
export const defaultMaxStreams = 128;

/** What a refused caller is told to wait, in seconds. */
const retryAfterSeconds = 1;

/** The routes answering with an event stream, by method. */
const streamRoutes: readonly (readonly ["GET" | "POST", string])[] = [
  ["GET", "/runs/:threadId/frames"],
  ["GET", "/ag-ui/threads/:threadId/events"],
  ["POST", "/ag-ui/:graph"],
];

/** The context key of a stream's place, which the stream keeps until it ends (`keepStreamPlace`). */
const streamPlaceKey = "durable.streamPlace";

interface StreamPlace {
  readonly free: () => void;
  kept: boolean;
}

function refused(what: "requests" | "streams", held: number, max: number): DurableError {
  const message =
    what === "requests"
      ? `${max} requests of this caller are in flight already; retry in ${retryAfterSeconds} s`
      : `${max} event streams of this caller are open already; retry in ${retryAfterSeconds} s`;
  return new DurableError("too_many_requests", message, {
    retryable: true,
    data: { [what === "requests" ? "inFlight" : "streams"]: held, max, retryAfterSeconds },
  });
}

/**
 * Registers both bounds on `app`: after the tenant is known, before any body is read (so before the
 * body limit, which reads a chunked body whole).
 */
export function limitRequests(app: Hono, options: { maxInFlight: number; maxStreams: number }): void {
  const requests = createPlaces({ max: options.maxInFlight, name: "maxInFlight" });
  const streams = createPlaces({ max: options.maxStreams, name: "maxStreams" });
  const tenantOf = (c: Context) => (c.get("tenant" as never) as string | undefined) ?? "";

  for (const [method, path] of streamRoutes) {
    const stream: MiddlewareHandler = async (c, next) => {
      if (c.req.method !== method) return next();
      const tenant = tenantOf(c);
      const place = streams.take(tenant);
      if (place === undefined) throw refused("streams", streams.held(tenant), streams.max);
      const held: StreamPlace = { free: place, kept: false };
      c.set(streamPlaceKey as never, held as never);
      try {
        await next();
      } finally {
        // A stream answered keeps its place until it ends; an error answered frees it now.
        if (!held.kept) held.free();
      }
    };
    app.use(path, stream);
  }

  app.use("*", async (c, next) => {
    // A GET stream carries no body: its own place is all it holds.
    if (c.req.method === "GET" && c.get(streamPlaceKey as never) !== undefined) return next();
    const tenant = tenantOf(c);
    const place = requests.take(tenant);
    if (place === undefined) throw refused("requests", requests.held(tenant), requests.max);
    try {
      await next();
    } finally {
      place();
    }
  });
}

/**
 * Called by a stream route just before it answers with its stream: the stream's place is kept past the
 * handler, and the function returned frees it (call it once the stream has ended, however it ended).
 */
export function keepStreamPlace(c: Context): () => void {
  const held = c.get(streamPlaceKey as never) as StreamPlace | undefined;
  if (held === undefined) return () => {};
  held.kept = true;
  return held.free;
}
