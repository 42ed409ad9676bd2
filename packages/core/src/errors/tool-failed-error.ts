import { ToolError, type ToolErrorDataByCode } from "./tool-error.ts";

/** `tool_failed`: the tool threw something that was not a ToolError. The original is the `cause`. */
export class ToolFailedError extends ToolError<"tool_failed", ToolErrorDataByCode["tool_failed"]> {
  static override readonly brand: symbol = Symbol.for("tackle.core.tool-failed-error");

  constructor(tool: string, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super("tool_failed", `Tool "${tool}" failed: ${reason}`, { data: { tool }, cause });
    this.name = "ToolFailedError";
  }
}
