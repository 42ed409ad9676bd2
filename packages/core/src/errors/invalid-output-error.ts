import { ToolError, type ToolErrorDataByCode } from "./tool-error.ts";
import { boundIssues, formatIssues, type ValidationIssue } from "./validation-issue.ts";

/** `invalid_output`: the tool returned a value its own output schema refuses: a bug in the tool. */
export class InvalidOutputError extends ToolError<"invalid_output", ToolErrorDataByCode["invalid_output"]> {
  static override readonly brand: symbol = Symbol.for("tackle.core.invalid-output-error");

  constructor(tool: string, issues: readonly ValidationIssue[]) {
    const { kept, omitted } = boundIssues(issues);
    super("invalid_output", `Tool "${tool}" returned invalid output: ${formatIssues(kept, omitted)}`, {
      data: { tool, issues: kept, ...(omitted > 0 ? { omittedIssues: omitted } : {}) },
    });
    this.name = "InvalidOutputError";
  }
}
