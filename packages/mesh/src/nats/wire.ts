/** How a tool call crosses NATS: JSON bodies, call metadata in headers, errors in the service-error headers. */
import { ToolError, type ToolErrorPayload } from "@tackle/core";

export const callIdHeader = "Tackle-Call-Id";
export const idempotencyKeyHeader = "Tackle-Idempotency-Key";
export const timeoutHeader = "Tackle-Timeout-Ms";
/** The string error code, beside the numeric one the services API puts in Nats-Service-Error-Code. */
export const errorCodeHeader = "Tackle-Error-Code";
/**
 * On a node's own refusal of a call before it read the arguments (`overloaded`, ADR 0214): the call did
 * not run. A tool cannot set it, so a tool's own `overloaded` error (it ran) never carries it; the
 * client sends again only a refusal that does (ADR 0215).
 */
export const notRunHeader = "Tackle-Not-Run";

/**
 * `<prefix>.tools.held` takes `{ callIds }`; every node serving the module (a plain subscription, not
 * the queue group) answers with the ones it is running, so a caller knows who holds a call and that
 * the node lives.
 */
export const HELD_VERB = "tools.held";

/**
 * `<prefix>.tools.alive.<instance>`: each node process subscribes it (with `tools.held`) and answers
 * empty. A caller whose holder went silent asks it: "no responders" means the process's connection is
 * gone; a timeout or an answer means the process is there, only busy.
 */
export const ALIVE_VERB = "tools.alive";

/**
 * `<prefix>.tools.serving`: a node process announces `{ prefix, node, instance }` there as it starts
 * serving the module, before it can take a call (ADR 0225). A caller watching the module learns of the
 * new instance at once, so a call that instance takes and dies with fails `node_lost` although the
 * instance never answered a question.
 */
export const SERVING_VERB = "tools.serving";

/** What a node announces on `<prefix>.tools.serving`. */
export interface ServingNotice {
  readonly prefix: string;
  readonly node: string;
  /** The node process's random id, as in its answers on `<prefix>.tools.held`. */
  readonly instance: string;
}

/** A question on `<prefix>.tools.held`. */
export interface HeldQuestion {
  readonly callIds: readonly string[];
  /**
   * Calls whose fate the caller needs (ADR 0208), by their reply subject (unique per request): the
   * node says which it finished, and promises never to run those marked `disown` that it has neither
   * running nor finished.
   */
  readonly check?: readonly { readonly callId: string; readonly reply: string; readonly disown?: boolean }[];
}

/** What a node answers on `<prefix>.tools.held`. */
export interface HeldAnswer {
  readonly prefix: string;
  readonly node: string;
  /** The node process's random id: a node restarted under the same name is another instance. */
  readonly instance: string;
  readonly held: readonly string[];
  /** Of the calls checked: those that finished here, by reply subject, with `ok` or their error code. */
  readonly finished?: readonly { readonly reply: string; readonly outcome: string }[];
  /** Of the calls checked with `disown`: those this node never saw and will now refuse. */
  readonly disowned?: readonly string[];
  /** How far back (ms) this node remembers every call that finished; present when anything was checked. */
  readonly rememberedMs?: number;
  /**
   * How many times this node process's connection has reconnected to the bus: a caller whose call no
   * node claims learns that a request may have died with the node's server (ADR 0208).
   */
  readonly reconnects?: number;
}

/** Numeric service-error codes, HTTP-like, for clients that read only the standard headers. */
const statusByCode: Record<string, number> = {
  invalid_input: 400,
  invalid_request: 400,
  unknown_tool: 404,
  timeout: 408,
  aborted: 499,
  child_exited: 503,
  child_failed: 503,
  unavailable: 503,
  payload_too_large: 413,
  not_delivered: 503,
  overloaded: 503,
};

export function serviceStatus(code: string): number {
  // Its own codes only: a tool's error coded `toString` or `constructor` is a 500, not a function.
  return Object.hasOwn(statusByCode, code) ? (statusByCode[code] as number) : 500;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeJson(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value === undefined ? null : value));
}

/** An empty body means no arguments; anything else must be JSON. */
export function decodeJson(data: Uint8Array): unknown {
  if (data.length === 0) return undefined;
  return JSON.parse(decoder.decode(data));
}

/** Rebuilds the ToolError a service answered with (its body is the error's wire form). */
export function decodeServiceError(code: number, description: string, body: Uint8Array): ToolError {
  try {
    const payload = decodeJson(body) as ToolErrorPayload | undefined;
    if (payload !== undefined && typeof payload.code === "string" && typeof payload.message === "string") {
      return ToolError.fromPayload(payload);
    }
  } catch {
    // A foreign service's non-JSON error body: the standard headers still say what happened.
  }
  return new ToolError("service_error", description, { data: { status: code } });
}

/**
 * A message over the broker's `max_payload`: never retryable (the same call fails the same way), and
 * the message states the size and the limit.
 */
export function payloadTooLarge(
  what: "arguments" | "a result",
  name: string,
  size: number,
  limit: number,
): ToolError {
  return new ToolError(
    "payload_too_large",
    `"${name}": ${what} of ${size} bytes is over the broker's limit of ${limit} bytes (max_payload); send less, or raise max_payload on the NATS server`,
    { retryable: false, data: { tool: name, size, limit } },
  );
}

/** The broker's limit on one message, as it announced it (1 MiB when unknown). */
export function maxPayloadOf(connection: { readonly info?: { readonly max_payload?: number } }): number {
  return connection.info?.max_payload ?? 1024 * 1024;
}
