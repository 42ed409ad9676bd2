/** How the HTTP API answers a failure: one coded JSON body for every refusal, and the OpenAPI text of each. */

import { type Logger, ToolError } from "@tackle/core";
import { isTransientDatabaseError } from "@tackle/storage";
import type { ErrorHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { MemoryError } from "../errors/memory-error.ts";

export function errorBody(error: ToolError) {
  return { error: error.toJSON() } as {
    error: { code: string; message: string; retryable: boolean; data?: unknown };
  };
}

export const errorResponses = {
  400: { description: "Invalid input; `error.data.issues` lists why. Nothing was stored." },
  401: { description: "Missing or unknown API key" },
  403: {
    description:
      "`scope_forbidden`: the API key is bound to one identity and the request names another, or the route spans the tenant",
  },
  404: { description: "Not found in this tenant" },
  409: {
    description:
      "Conflict (version, duplicate); `quota_exceeded`: the write would pass the tenant's storage quota (`error.data`: kind, limit, used, requested), nothing stored; Idempotency-Key still in use (retryable), or its write done but its answer too large to keep",
  },
  429: {
    description: "Over the tenant's rate limit, or its requests with a body in flight (64); see Retry-After",
  },
  422: {
    description:
      "Edit refused (no match, ambiguous, over capacity); Idempotency-Key reused for another request",
  },
  503: {
    description:
      "`unavailable`, retryable: the store could not be reached for the moment (a connection lost or refused, a deadlock victim); retry after Retry-After, under the same Idempotency-Key for a write",
  },
};

/** The request failed its schema: 400 `invalid_input`, each issue with its path. */
export function invalidRequest(
  target: string,
  zodIssues: readonly { readonly path: readonly PropertyKey[]; readonly message: string }[],
): MemoryError {
  const issues = zodIssues.map((issue) => ({
    path: issue.path.filter((key) => typeof key !== "symbol"),
    message: issue.message,
  }));
  const summary = issues.map((issue) => `${issue.path.join(".") || "(root)"}: ${issue.message}`).join("; ");
  return new MemoryError("invalid_input", `Invalid request (${target}): ${summary}`, 400, {
    data: { issues },
  });
}

/**
 * Coded errors answer with their status. A transient database error (a connection lost or refused,
 * the server out of connections or shutting sessions down, a deadlock or serialization victim) rolled
 * the request's transaction back: it answers 503 `unavailable`, retryable, with `Retry-After: 1`
 * (ADR 0569). Anything else unexpected is logged and answers 500 `internal`.
 */
export function answerError(logger: Logger): ErrorHandler {
  return (error, context) => {
    if (MemoryError.isInstance(error))
      return context.json(errorBody(error), error.status as ContentfulStatusCode);
    if (error instanceof HTTPException && error.status === 415) {
      const refusal = new MemoryError(
        "invalid_input",
        "Send the body as JSON, with the header `Content-Type: application/json`",
        415,
        { data: { expected: "application/json", received: context.req.header("content-type") ?? null } },
      );
      return context.json(errorBody(refusal), 415);
    }
    if (error instanceof HTTPException) {
      const code =
        error.status === 413 ? "payload_too_large" : error.status === 401 ? "unauthorized" : "invalid_input";
      const message =
        error.message ||
        (error.status === 413
          ? "The request body is larger than the service accepts"
          : "The request was refused");
      return context.json(errorBody(new MemoryError(code, message, error.status)), error.status);
    }
    if (ToolError.isInstance(error)) return context.json(errorBody(error), 400);
    if (isTransientDatabaseError(error)) {
      logger.warn("memory request met a transient database error", {
        path: context.req.path,
        error: (error as Error)?.message,
      });
      const unavailable = new MemoryError(
        "unavailable",
        "The memory store could not be reached for the moment; retry",
        503,
      );
      return context.json(errorBody(unavailable), 503, { "retry-after": "1" });
    }
    logger.error("memory request failed", { path: context.req.path, error: (error as Error)?.message });
    return context.json(
      errorBody(new MemoryError("internal", "The memory service failed; see its log", 500)),
      500,
    );
  };
}
