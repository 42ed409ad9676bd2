/** `network_error`: the connection to the memory service failed (refused, reset, DNS). Retryable. */
import { ToolError } from "@tackle/core";

const memoryNetworkBrand = Symbol.for("tackle.memory-network-error");

export class MemoryNetworkError extends ToolError {
  readonly [memoryNetworkBrand] = true;

  constructor(url: string, cause: unknown) {
    super(
      "network_error",
      `Could not reach the memory service at ${url}: ${(cause as Error)?.message ?? cause}`,
      {
        retryable: true,
        data: { url },
        cause,
      },
    );
    this.name = "MemoryNetworkError";
  }

  static override isInstance(value: unknown): value is MemoryNetworkError {
    return (
      typeof value === "object" &&
      value !== null &&
      (value as Record<symbol, unknown>)[memoryNetworkBrand] === true
    );
  }
}
