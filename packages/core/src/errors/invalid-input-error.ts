import { ToolError, type ToolErrorDataByCode } from "./tool-error.ts";
import { boundIssues, formatIssues, type ValidationIssue } from "./validation-issue.ts";

export { formatIssues, type ValidationIssue } from "./validation-issue.ts";

/** `invalid_input`: the arguments did not match the tool's input schema. `data.issues` lists why. */
export class InvalidInputError extends ToolError<"invalid_input", ToolErrorDataByCode["invalid_input"]> {
  static override readonly brand: symbol = Symbol.for("tackle.core.invalid-input-error");

  constructor(tool: string, issues: readonly ValidationIssue[]) {
    const { kept, omitted } = boundIssues(issues);
    super("invalid_input", `Invalid input for tool "${tool}": ${formatIssues(kept, omitted)}`, {
      data: { tool, issues: kept, ...(omitted > 0 ? { omittedIssues: omitted } : {}) },
    });
    this.name = "InvalidInputError";
  }
}
