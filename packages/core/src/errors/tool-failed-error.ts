import { ToolError, type ToolErrorDataByCode } from "./tool-error.ts";

/** The characters of a thrown error's message a `tool_failed` error repeats. */
const keptReasonCharacters = 2_000;

/** `tool_failed`: the tool threw something that was not a ToolError. The original is the `cause`. */
export class ToolFailedError extends ToolError<"tool_failed", ToolErrorDataByCode["tool_failed"]> {
  static override readonly brand: symbol = Symbol.for("tackle.core.tool-failed-error");

  constructor(tool: string, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    // The message goes to the model; a thrown error can quote a whole input. The cause keeps it all.
    const told =
      reason.length <= keptReasonCharacters
        ? reason
        : `${reason.slice(0, keptReasonCharacters)}… (${reason.length} characters)`;
    super("tool_failed", `Tool "${tool}" failed: ${told}`, { data: { tool }, cause });
    this.name = "ToolFailedError";
  }
}
