import { ToolError, type ToolErrorDataByCode } from "./tool-error.ts";

/** `timeout`: the tool did not finish within its time limit. Retryable. */
export class ToolTimeoutError extends ToolError<"timeout", ToolErrorDataByCode["timeout"]> {
  static override readonly brand: symbol = Symbol.for("tackle.core.tool-timeout-error");

  constructor(tool: string, timeoutMs: number) {
    super("timeout", `Tool "${tool}" timed out after ${timeoutMs} ms`, {
      retryable: true,
      data: { tool, timeoutMs },
    });
    this.name = "ToolTimeoutError";
  }
}
