/** `timeout`: the memory service did not answer within the client's timeout. Retryable. */
import { ToolError } from "@tackle/core";

const memoryTimeoutBrand = Symbol.for("tackle.memory-timeout-error");

export class MemoryTimeoutError extends ToolError {
  readonly [memoryTimeoutBrand] = true;

  constructor(url: string, timeoutMs: number) {
    super("timeout", `The memory service at ${url} did not answer within ${timeoutMs} ms`, {
      retryable: true,
      data: { url, timeoutMs },
    });
    this.name = "MemoryTimeoutError";
  }

  static override isInstance(value: unknown): value is MemoryTimeoutError {
    return (
      typeof value === "object" &&
      value !== null &&
      (value as Record<symbol, unknown>)[memoryTimeoutBrand] === true
    );
  }
}
