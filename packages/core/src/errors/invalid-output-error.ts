import { ToolError, type ToolErrorDataByCode } from "./tool-error.ts";
import { formatIssues, type ValidationIssue } from "./validation-issue.ts";

/** `invalid_output`: the tool returned a value its own output schema refuses: a bug in the tool. */
export class InvalidOutputError extends ToolError<"invalid_output", ToolErrorDataByCode["invalid_output"]> {
  static override readonly brand: symbol = Symbol.for("tackle.core.invalid-output-error");

  constructor(tool: string, issues: readonly ValidationIssue[]) {
    super("invalid_output", `Tool "${tool}" returned invalid output: ${formatIssues(issues)}`, {
      data: { tool, issues },
    });
    this.name = "InvalidOutputError";
  }
}
