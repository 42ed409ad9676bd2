/**
 * The bound on the requests `serveMcpHttp` serves at once (ADR 0534): past it a POST is answered 429
 * with `Retry-After: 1` before its body is read, so a flood of calls holds at most that many bodies and
 * tool runs on the host.
 */
import type { ServerResponse } from "node:http";
import { ToolError } from "../errors/tool-error.ts";
import { createPlaces } from "../http/places.ts";

/** The default of `maxInFlight`: 64 requests at once, each body at most the SDK's 4 MiB. */
export const defaultMaxInFlight = 64;

/** Seconds a refused client is asked to wait before it sends again. */
const retryAfterSeconds = 1;

export interface InFlightBound {
  /** The most requests served at once. */
  readonly max: number;
  /** A place for one request, and the function that gives it back (once); undefined when all are held. */
  take(): (() => void) | undefined;
}

/** A count of the requests in flight, `maxInFlight` checked: a whole number of at least 1. */
export function createInFlightBound(maxInFlight: number = defaultMaxInFlight): InFlightBound {
  if (!Number.isSafeInteger(maxInFlight) || maxInFlight < 1) {
    throw new ToolError(
      "invalid_max_in_flight",
      `maxInFlight must be a whole number of requests, at least 1 (got ${maxInFlight})`,
      { data: { maxInFlight } },
    );
  }
  // One key: the bound is the endpoint's, whoever calls.
  const places = createPlaces<"endpoint">({ max: maxInFlight });
  return { max: maxInFlight, take: () => places.take("endpoint") };
}

/**
 * The refusal of a request past the bound: 429, `Retry-After: 1`, and a JSON-RPC error with no id (the
 * body, where the id is, was not read). The MCP SDK client throws it as an `SdkHttpError` whose message
 * carries this body and whose `status` is 429; `data` says what to do in Tackle's coded-error words.
 */
export function refuseOverloaded(response: ServerResponse, maxInFlight: number): void {
  const message = `This MCP endpoint is serving ${maxInFlight} requests already, its most at once; retry in ${retryAfterSeconds} s`;
  const body = JSON.stringify({
    jsonrpc: "2.0",
    error: {
      code: -32000,
      message,
      data: { code: "overloaded", retryable: true, retryAfterSeconds, maxInFlight },
    },
    id: null,
  });
  response
    .writeHead(429, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
      "retry-after": String(retryAfterSeconds),
    })
    .end(body);
}
