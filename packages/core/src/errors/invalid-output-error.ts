import { formatIssues, type ValidationIssue } from "./invalid-input-error.ts";
import { ToolError } from "./tool-error.ts";

/** `invalid_output`: the tool returned a value its own output schema refuses: a bug in the tool. */
export class InvalidOutputError extends ToolError {
  declare readonly data: { readonly tool: string; readonly issues: readonly ValidationIssue[] };

  constructor(tool: string, issues: readonly ValidationIssue[]) {
    super("invalid_output", `Tool "${tool}" returned invalid output: ${formatIssues(issues)}`, {
      data: { tool, issues },
    });
    this.name = "InvalidOutputError";
  }
}
