/**
 * Reading a request's JSON body, the `invalid_request` error every route answers bad input with, and
 * the refusal of a body past `maxBodyBytes`.
 */
import { DurableError } from "../errors/durable-error.ts";

export function invalid(message: string): DurableError {
  return new DurableError("invalid_request", message);
}

const KiB = 1024;
const MiB = 1024 * KiB;

/**
 * The 413 answer to a body past `maxBytes`: the bound in words and in `data.maxBytes`; not retryable
 * (the same body is refused again), in the shape of every other error body (`ToolError.toJSON`).
 */
export function tooLargeBody(maxBytes: number) {
  const words =
    maxBytes % MiB === 0
      ? `${maxBytes / MiB} MiB (${maxBytes} bytes)`
      : maxBytes % KiB === 0
        ? `${maxBytes / KiB} KiB (${maxBytes} bytes)`
        : `${maxBytes} bytes`;
  return {
    error: {
      code: "payload_too_large",
      message: `The request body is over ${words}, the most this server reads`,
      retryable: false,
      data: { maxBytes },
    },
  };
}

export async function readJson(request: Request): Promise<Record<string, unknown>> {
  // Only JSON: a form or text/plain POST is what a cross-site page can send without a preflight.
  const type = request.headers.get("content-type") ?? "";
  if (!/^application\/json\b/i.test(type)) {
    throw new DurableError("unsupported_media_type", "The body must be sent as application/json");
  }
  let body: unknown;
  try {
    body = await request.json();
  } catch {
    throw invalid("The body is not JSON");
  }
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw invalid("The body is a JSON object");
  return body as Record<string, unknown>;
}
