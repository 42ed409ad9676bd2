/** `network_error`: the connection to the memory service failed (refused, reset, DNS). Retryable. */
import { ToolError } from "@tackle/core";

export class MemoryNetworkError extends ToolError<"network_error", { readonly url: string }> {
  static override readonly brand: symbol = Symbol.for("tackle.memory-network-error");

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
}
