/** The memory service's coded error: a `ToolError` that also knows its HTTP status. */
import { ToolError, type ToolErrorOptions } from "@tackle/core";

const memoryErrorBrand = Symbol.for("tackle.memory-error");

/**
 * Codes: `invalid_input` 400, `unauthorized` 401, `not_found` 404, `conflict` 409,
 * `edit_no_match` / `edit_ambiguous` / `capacity_exceeded` 422, `rate_limited` 429,
 * `internal` 500, `unavailable` 503. `data` carries details (issues, remaining capacity, ...).
 */
export class MemoryError extends ToolError {
  readonly [memoryErrorBrand] = true;
  readonly status: number;

  constructor(code: string, message: string, status: number, options: ToolErrorOptions = {}) {
    super(code, message, { retryable: options.retryable ?? (status === 429 || status >= 500), ...options });
    this.name = "MemoryError";
    this.status = status;
  }

  static override isInstance(value: unknown): value is MemoryError {
    return (
      typeof value === "object" &&
      value !== null &&
      (value as Record<symbol, unknown>)[memoryErrorBrand] === true
    );
  }

  static notFound(what: string, id: string): MemoryError {
    return new MemoryError("not_found", `${what} ${id} was not found`, 404, { data: { id } });
  }
}
