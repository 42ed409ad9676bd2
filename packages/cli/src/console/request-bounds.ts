/**
 * What one credential of the console holds at once (ADR 0270): requests in flight and, apart from
 * them, open event streams. The bearer token is one credential (on `/mcp` and on the page's API alike),
 * the web page's signed-in sessions together another. A place is taken on a request's headers, once its
 * credential is known and before its body is read; past the bound the request is answered 429 with
 * `Retry-After: 1` at once. A place is given back when the answer has been written through (its body's
 * last chunk read, or no body) or the client is gone (the request's signal), whichever comes first.
 * When a credential's request places are all held, a small POST may still be read in one of a few
 * reply places: it may be a cancel, or the client's answer to a question a held call asked, which the
 * held calls need; once read, anything else is refused as a request. Sign-ins, which carry no
 * credential yet, are counted for the whole console apart (ADR 0273).
 */
import { createPlaces } from "@tackle/core/internal";
import { boundCount } from "../program/bound-count.ts";

/** Requests a credential holds at once, every one but an event stream: 64 bodies of at most 4 MiB. */
export const defaultMaxInFlight = 64;
/** Event streams a credential holds open at once: one for each of the 64 sessions the console keeps. */
export const defaultMaxStreams = 64;
/** Places a credential has for small POSTs read while its request places are all held. */
export const maxReplies = 16;
/** The most a POST may declare to be read in a reply place: a cancel or an answer, not a payload. */
export const maxReplyBytes = 64 * 1024;
/**
 * Sign-ins (`POST /api/session`) the console reads at once, whoever sends them: a person signs in once
 * per browser, so 16 cover any number of people at once and bound what strangers hold to 16 bodies of
 * at most 16 KiB (ADR 0273).
 */
export const maxSignIns = 16;
/** Seconds a refused client is asked to wait before it sends again. */
const retryAfterSeconds = 1;

export interface ConsoleBoundsOptions {
  /** Requests one credential holds at once, event streams aside. Default {@link defaultMaxInFlight}. */
  readonly maxInFlight?: number;
  /**
   * Event streams one credential holds open at once: a `GET` that asks for `text/event-stream` (a 2025
   * session's stream, the page's live status), and a 2026-07-28 `subscriptions/listen` (a POST whose
   * body is one). Default {@link defaultMaxStreams}.
   */
  readonly maxStreams?: number;
}

/** Whose places a request takes: the bearer token's, or the signed-in web page's. */
export type Credential = "token" | "page";
/**
 * What a place is for: a request (a body being read, a call running), an event stream, or a reply (a
 * small POST read while the requests' places are all held, kept only by a notification or a response).
 */
export type PlaceKind = "request" | "stream" | "reply";

export interface Place {
  readonly credential: Credential;
  readonly kind: PlaceKind;
  /**
   * Moves the place to `kind`'s (a POST whose body turned out to be a listen, or not to be one): true
   * when it is there now; false, the place kept where it was, when `kind`'s are all held.
   */
  moveTo(kind: PlaceKind): boolean;
  /**
   * Keeps the place past its exchange until the returned function is called (once), for work that
   * outlives its HTTP request: a 2025 session's call runs on when its client drops the stream.
   */
  pin(): () => void;
  /** The exchange is over: the place goes back once no pin holds it. Once, whatever calls it again. */
  release(): void;
  /** Ends the exchange from this side: its answer's body is closed (nothing more will be written). */
  end(): void;
  /** How `end` closes the exchange (set by whoever serves its answer). */
  onEnd(close: () => void): void;
}

export interface ConsoleBounds {
  readonly maxInFlight: number;
  readonly maxStreams: number;
  /** A place of `kind` for `credential`, or undefined when all are held. */
  take(credential: Credential, kind: PlaceKind): Place | undefined;
  /** Places held now, for tests and logs. */
  held(credential: Credential): { readonly request: number; readonly stream: number; readonly reply: number };
  /** A sign-in's place, one of {@link maxSignIns} for the whole console, or undefined when all are held. */
  takeSignIn(): SignInPlace | undefined;
}

/** A sign-in's place: given back once, when its answer is written or its client is gone. */
export type SignInPlace = Pick<Place, "release" | "onEnd">;

export function createConsoleBounds(options: ConsoleBoundsOptions = {}): ConsoleBounds {
  const maxInFlight = boundCount("maxInFlight", options.maxInFlight, defaultMaxInFlight);
  const maxStreams = boundCount("maxStreams", options.maxStreams, defaultMaxStreams);
  const places = {
    request: createPlaces<Credential>({ max: maxInFlight }),
    stream: createPlaces<Credential>({ max: maxStreams }),
    reply: createPlaces<Credential>({ max: maxReplies }),
  };
  const signIns = createPlaces<"sign-in">({ max: maxSignIns });
  return {
    maxInFlight,
    maxStreams,
    held: (credential) => ({
      request: places.request.held(credential),
      stream: places.stream.held(credential),
      reply: places.reply.held(credential),
    }),
    takeSignIn() {
      const free = signIns.take("sign-in");
      return free === undefined ? undefined : { release: free, onEnd: () => {} };
    },
    take(credential, kind) {
      const taken = places[kind].take(credential);
      if (taken === undefined) return undefined;
      let free = taken;
      let current: PlaceKind | undefined = kind;
      let over = false;
      let pins = 0;
      let close = () => {};
      const giveBack = () => {
        if (current === undefined || !over || pins > 0) return;
        free();
        current = undefined;
      };
      return {
        credential,
        get kind() {
          return current ?? kind;
        },
        moveTo(to) {
          if (current === undefined) return false;
          if (current === to) return true;
          const moved = places[to].take(credential);
          if (moved === undefined) return false;
          free();
          free = moved;
          current = to;
          return true;
        },
        pin() {
          if (current === undefined) return () => {};
          pins += 1;
          let unpinned = false;
          return () => {
            if (unpinned) return;
            unpinned = true;
            pins -= 1;
            giveBack();
          };
        },
        release() {
          over = true;
          giveBack();
        },
        end() {
          close();
        },
        onEnd(closeWith) {
          close = closeWith;
        },
      };
    },
  };
}

/**
 * A place for `request` of `credential`'s: of `kind`, or when those are all held and it is a POST
 * declaring a small body, a reply place (its body, once read, keeps it or moves it).
 */
export function takePlace(
  bounds: ConsoleBounds,
  credential: Credential,
  kind: PlaceKind,
  request: Request,
): Place | undefined {
  const place = bounds.take(credential, kind);
  if (place !== undefined || kind !== "request" || request.method !== "POST") return place;
  const length = Number(request.headers.get("content-length") ?? Number.NaN);
  return length >= 0 && length <= maxReplyBytes ? bounds.take(credential, "reply") : undefined;
}

/**
 * A stream by its headers alone: a `GET` (or `HEAD`) that asks for an event stream, and on `/mcp`
 * (`listen`) a POST that names itself `subscriptions/listen` in `Mcp-Method` (its body confirms it or
 * moves it, `McpEndpoint.fetch`). A client that says so of a quick read only moves it to its own
 * streams' bound: every request is counted in one of the two.
 */
export function kindOf(request: Request, listen = false): PlaceKind {
  if (request.method === "GET" || request.method === "HEAD") {
    return (request.headers.get("accept") ?? "").includes("text/event-stream") ? "stream" : "request";
  }
  return listen && request.method === "POST" && request.headers.get("mcp-method") === "subscriptions/listen"
    ? "stream"
    : "request";
}

/**
 * Serves `request` in `place`: the place is given back once the answer's body has been read to its end
 * or dropped, or the client is gone (its signal), or `serve` throws.
 */
export async function servedInPlace(
  place: Pick<Place, "release" | "onEnd">,
  request: Request,
  serve: () => Response | Promise<Response>,
): Promise<Response> {
  const signal = request.signal;
  if (signal.aborted) place.release();
  else signal.addEventListener("abort", () => place.release(), { once: true });
  let response: Response;
  try {
    response = await serve();
  } catch (error) {
    place.release();
    throw error;
  }
  if (response.body === null) {
    place.release();
    return response;
  }
  const reader = response.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      place.onEnd(() => {
        place.release();
        reader.cancel().catch(() => {});
        try {
          controller.close();
        } catch {
          // already closed or errored: nothing more to end
        }
      });
    },
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          place.release();
          controller.close();
        } else controller.enqueue(value);
      } catch (error) {
        place.release();
        controller.error(error);
      }
    },
    cancel(reason) {
      place.release();
      return reader.cancel(reason);
    },
  });
  return new Response(body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

/** What a refusal says, in words and in `data`. */
function refusal(bounds: ConsoleBounds, credential: Credential, kind: PlaceKind) {
  const whose = credential === "token" ? "this bearer token" : "the signed-in web page";
  const message =
    kind === "stream"
      ? `The console holds ${bounds.maxStreams} event streams open for ${whose} already, its most at once; close one or retry in ${retryAfterSeconds} s`
      : `The console is serving ${bounds.maxInFlight} requests for ${whose} already, its most at once; retry in ${retryAfterSeconds} s`;
  const data = {
    code: "overloaded",
    retryable: true,
    retryAfterSeconds,
    ...(kind === "stream" ? { maxStreams: bounds.maxStreams } : { maxInFlight: bounds.maxInFlight }),
  };
  return { message, data };
}

const refusedHeaders = { "content-type": "application/json", "retry-after": String(retryAfterSeconds) };

/**
 * A refusal on `/mcp`: 429, `Retry-After: 1`, and a JSON-RPC error with `id` null (the body, where the
 * id is, was not read) that the MCP SDK client throws with its text, as core's endpoint answers (ADR 0534).
 */
export function refusedMcp(bounds: ConsoleBounds, credential: Credential, kind: PlaceKind): Response {
  const { message, data } = refusal(bounds, credential, kind);
  return new Response(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message, data }, id: null }), {
    status: 429,
    headers: refusedHeaders,
  });
}

/** A refusal on the page's API, in its own error shape: 429, `Retry-After: 1`, `overloaded`. */
export function refusedPage(bounds: ConsoleBounds, credential: Credential, kind: PlaceKind): Response {
  const { message, data } = refusal(bounds, credential, kind);
  const { code, ...rest } = data;
  return new Response(JSON.stringify({ error: { code, message, data: rest } }), {
    status: 429,
    headers: refusedHeaders,
  });
}

/** A sign-in past {@link maxSignIns}: 429, `Retry-After: 1`, `overloaded`, in the page API's shape. */
export function refusedSignIn(): Response {
  const message = `The console is reading ${maxSignIns} sign-ins already, its most at once; retry in ${retryAfterSeconds} s`;
  const data = { retryable: true, retryAfterSeconds, maxSignIns };
  return new Response(JSON.stringify({ error: { code: "overloaded", message, data } }), {
    status: 429,
    headers: refusedHeaders,
  });
}
