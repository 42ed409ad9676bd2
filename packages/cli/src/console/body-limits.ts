/**
 * How much of a request body the console reads, route by route (ADR 0271). A tool call's body, on `/mcp`
 * and on the page's `/api/call/stream` alike, is read up to 4 MiB (the MCP SDK's bound, which `/mcp`
 * hands the SDK); durable's API under `/api/durable` up to 1 MiB (durable's own server's bound); sign-in
 * and every other route of the page's API up to 16 KiB: a code, a token, a few fields.
 *
 * A bound is applied from the headers on: a declared `Content-Length` past it is refused before a byte
 * is read, a chunked body as soon as the bytes read pass it; either way 413 with the bound in words and
 * in `data.maxBytes`, while the client may still be sending (what it sends on is dropped, never kept).
 * Every bound but sign-in's applies once the request's credential is known and its place taken
 * (ADR 0270); sign-in's applies before the code or token in the body is checked.
 */
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";

const KiB = 1024;
const MiB = 1024 * KiB;

/** A tool call's body, on `/mcp` (the SDK's default, passed to it explicitly) and from the page. */
export const toolCallBodyBytes = 4 * MiB;
/** A body of durable's API under `/api/durable`: its own server's default bound. */
export const durableBodyBytes = MiB;
/** Sign-in, and any other route of the page's API: a one-time code, a token, a few fields. */
export const smallBodyBytes = 16 * KiB;

/** A route's bound and the words its refusal names the route by. */
export interface BodyBound {
  readonly bytes: number;
  readonly route: string;
}

export const signInBound: BodyBound = { bytes: smallBodyBytes, route: "POST /api/session" };

/** The bound of a request to the page's API (past sign-in), by its path. */
export function pageBodyBound(method: string, path: string): BodyBound {
  if (path === "/api/call/stream") return { bytes: toolCallBodyBytes, route: `${method} ${path}` };
  if (path === "/api/durable" || path.startsWith("/api/durable/"))
    return { bytes: durableBodyBytes, route: "/api/durable" };
  return { bytes: smallBodyBytes, route: `${method} ${path}` };
}

function inWords(bytes: number): string {
  if (bytes % MiB === 0) return `${bytes / MiB} MiB`;
  if (bytes % KiB === 0) return `${bytes / KiB} KiB`;
  return `${bytes} bytes`;
}

/** The refusal, in the page's API's error shape. */
export function tooLargeBody({ bytes, route }: BodyBound) {
  return {
    error: {
      code: "payload_too_large",
      message: `The request body is over ${inWords(bytes)} (${bytes} bytes), the most the console reads for ${route}`,
      data: { maxBytes: bytes },
    },
  };
}

/** Hono's body limit at `bound` (or the bound of each request), answering {@link tooLargeBody} 413. */
export function limitBody(bound: BodyBound | ((context: Context) => BodyBound)): MiddlewareHandler {
  return (context, next) => {
    const at = typeof bound === "function" ? bound(context) : bound;
    return bodyLimit({
      maxSize: at.bytes,
      onError: (refused) => refused.json(tooLargeBody(at), 413),
    })(context, next);
  };
}
