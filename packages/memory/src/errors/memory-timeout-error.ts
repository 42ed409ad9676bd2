/** `timeout`: the memory service did not answer within the client's timeout. Retryable. */
import { ToolError } from "@tackle/core";

export class MemoryTimeoutError extends ToolError<
  "timeout",
  { readonly url: string; readonly timeoutMs: number }
> {
  static override readonly brand: symbol = Symbol.for("tackle.memory-timeout-error");

  constructor(url: string, timeoutMs: number) {
    super("timeout", `The memory service at ${url} did not answer within ${timeoutMs} ms`, {
      retryable: true,
      data: { url, timeoutMs },
    });
    this.name = "MemoryTimeoutError";
  }
}
