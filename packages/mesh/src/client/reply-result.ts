/** Turns what the bus answered (or how the request failed) into a ToolCallResult. */
import { type Msg, NoRespondersError, PermissionViolationError, TimeoutError } from "@nats-io/transport-node";
import { type ToolCallResult, ToolError } from "@tackle/core";
import { decodeJson, decodeServiceError, notRunHeader } from "../nats/wire.ts";
import { markRefusedBeforeRun } from "./retry-overloaded.ts";

export function fromReply(message: Msg): ToolCallResult {
  const status = message.headers?.get("Nats-Service-Error-Code");
  if (status !== undefined && status !== "") {
    const description = message.headers?.get("Nats-Service-Error") ?? "service error";
    const error = decodeServiceError(Number(status), description, message.data);
    // The node refused it before reading it (ADR 0214): the client may send it again (ADR 0215).
    if (message.headers?.get(notRunHeader) === error.code) markRefusedBeforeRun(error);
    return { ok: false, error };
  }
  try {
    return { ok: true, output: decodeJson(message.data) };
  } catch (error) {
    return {
      ok: false,
      error: new ToolError("invalid_reply", `The reply is not JSON: ${(error as Error).message}`),
    };
  }
}

export function fromRequestError(error: unknown, name: string, timeoutMs: number): ToolCallResult {
  if (error instanceof NoRespondersError || (error as Error)?.cause instanceof NoRespondersError) {
    return {
      ok: false,
      error: new ToolError("no_responders", `Nothing answers for "${name}"`, { data: { name } }),
    };
  }
  if (
    error instanceof PermissionViolationError ||
    (error as Error)?.cause instanceof PermissionViolationError
  ) {
    return {
      ok: false,
      error: new ToolError(
        "forbidden",
        `This credential may not call "${name}": ${(error as Error).message}`,
        {
          data: { name },
        },
      ),
    };
  }
  if (error instanceof TimeoutError || (error as Error)?.cause instanceof TimeoutError) {
    return {
      ok: false,
      error: new ToolError("timeout", `No answer for "${name}" within ${timeoutMs} ms`, {
        retryable: true,
        data: { tool: name, timeoutMs },
      }),
    };
  }
  if (/max_payload/i.test((error as Error)?.message ?? "")) {
    // Refused before sending, so it never ran; the same call fails the same way: not retryable.
    return {
      ok: false,
      error: new ToolError(
        "payload_too_large",
        `The arguments of "${name}" are over the broker's max_payload`,
        {
          retryable: false,
          data: { tool: name },
        },
      ),
    };
  }
  return {
    ok: false,
    error: new ToolError(
      "unavailable",
      `The call to "${name}" could not be made: ${(error as Error)?.message ?? String(error)}`,
      {
        retryable: true,
        cause: error,
      },
    ),
  };
}
