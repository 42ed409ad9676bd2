import { ToolError } from "./tool-error.ts";

/** `timeout`: the tool did not finish within its time limit. Retryable. */
export class ToolTimeoutError extends ToolError {
  declare readonly data: { readonly tool: string; readonly timeoutMs: number };

  constructor(tool: string, timeoutMs: number) {
    super("timeout", `Tool "${tool}" timed out after ${timeoutMs} ms`, {
      retryable: true,
      data: { tool, timeoutMs },
    });
    this.name = "ToolTimeoutError";
  }
}
