/** `MemoryMiddlewareError`: why a middleware injected nothing or dropped a capture. */
import { ToolError } from "@tackle/core";

const memoryMiddlewareErrorBrand = Symbol.for("tackle.memory.middleware-error");

/**
 * Codes: `memory_context_failed` (the bundle fetch failed; nothing was injected) and
 * `memory_capture_failed` (writing the turn failed; the capture was dropped). `data.phase` repeats it
 * as `inject` or `capture`; `cause` holds the client's error.
 */
export class MemoryMiddlewareError extends ToolError {
  readonly [memoryMiddlewareErrorBrand] = true;

  constructor(code: "memory_context_failed" | "memory_capture_failed", message: string, cause: unknown) {
    super(code, message, {
      cause,
      retryable: true,
      data: { phase: code === "memory_context_failed" ? "inject" : "capture" },
    });
    this.name = "MemoryMiddlewareError";
  }

  static override isInstance(value: unknown): value is MemoryMiddlewareError {
    return (
      typeof value === "object" &&
      value !== null &&
      (value as Record<symbol, unknown>)[memoryMiddlewareErrorBrand] === true
    );
  }
}
