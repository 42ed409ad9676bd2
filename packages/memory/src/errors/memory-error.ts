/** The memory service's coded error: a `ToolError` that also knows its HTTP status. */
import { ToolError, type ToolErrorOptions } from "@tackle/core";

/**
 * The memory service's codes: `invalid_input` 400, `unauthorized` 401, `scope_forbidden` 403 (an API
 * key bound to one identity named another, or called a tenant-wide route), `not_found` 404, `conflict` 409,
 * `quota_exceeded` 409 (a write past the tenant's storage quota: `data.kind`, `limit`, `used`, `requested`),
 * `edit_no_match` / `edit_ambiguous` / `capacity_exceeded` 422, `rate_limited` 429,
 * `internal` 500, `unavailable` 503; `payload_too_large` 413; `idempotency_key_reused` 422 (the
 * key came with another request; `data.key`, `data.firstUsedAt`), `idempotency_key_in_use` 409,
 * retryable (the first request under the key still runs; `data.key`, `data.since`),
 * `idempotency_answer_not_kept` 409 (the write under the key was done, but its answer was over the
 * kept size; `data.key`, `data.answeredAt`, `data.bytes`, `data.maxAnswerBytes`); and on the client
 * `http_error` for an answer that is not the service's. `data` carries details (issues, remaining capacity, ...).
 */
export type MemoryErrorCode =
  | "invalid_input"
  | "unauthorized"
  | "scope_forbidden"
  | "not_found"
  | "conflict"
  | "quota_exceeded"
  | "edit_no_match"
  | "edit_ambiguous"
  | "capacity_exceeded"
  | "rate_limited"
  | "internal"
  | "unavailable"
  | "payload_too_large"
  | "idempotency_key_reused"
  | "idempotency_key_in_use"
  | "idempotency_answer_not_kept"
  | "http_error";

export class MemoryError extends ToolError<MemoryErrorCode> {
  static override readonly brand: symbol = Symbol.for("tackle.memory-error");
  readonly status: number;

  constructor(code: MemoryErrorCode, message: string, status: number, options: ToolErrorOptions = {}) {
    super(code, message, { retryable: options.retryable ?? (status === 429 || status >= 500), ...options });
    this.name = "MemoryError";
    this.status = status;
  }

  /** A lookup that found nothing (ADR 0027): `data.resource` is `what` in lower case (`memory`, `job`, `trace`). */
  static notFound(what: string, id: string): MemoryError {
    return new MemoryError("not_found", `${what} ${id} was not found`, 404, {
      data: { resource: what.toLowerCase(), id },
    });
  }
}
