/** `MemoryMiddlewareError`: why a middleware injected nothing or dropped a capture. */
import { ToolError } from "@tackle/core";

const phases = {
  memory_context_failed: "inject",
  memory_capture_failed: "capture",
  memory_identity_invalid: "identity",
} as const;

export type MemoryMiddlewareErrorCode = keyof typeof phases;

/**
 * Codes: `memory_context_failed` (the bundle fetch failed; nothing was injected; reported),
 * `memory_capture_failed` (writing the turn failed; the capture was dropped; reported) and
 * `memory_identity_invalid` (the call named an identity that is not one; thrown, the model is not
 * called). `data.phase` is `inject`, `capture` or `identity`; `cause` holds the underlying error.
 */
export class MemoryMiddlewareError extends ToolError<
  MemoryMiddlewareErrorCode,
  { readonly phase: (typeof phases)[MemoryMiddlewareErrorCode]; readonly [key: string]: unknown }
> {
  static override readonly brand: symbol = Symbol.for("tackle.memory.middleware-error");

  constructor(
    code: MemoryMiddlewareErrorCode,
    message: string,
    cause?: unknown,
    data: Record<string, unknown> = {},
  ) {
    super(code, message, {
      cause,
      retryable: code !== "memory_identity_invalid",
      data: { phase: phases[code], ...data },
    });
    this.name = "MemoryMiddlewareError";
  }
}
