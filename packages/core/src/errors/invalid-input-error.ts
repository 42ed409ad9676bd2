import { ToolError } from "./tool-error.ts";

/** One validation problem, in terms a model can act on. */
export interface ValidationIssue {
  /** Where the problem is, as property keys and array indexes from the root. */
  readonly path: readonly (string | number)[];
  readonly message: string;
}

/** `invalid_input`: the arguments did not match the tool's input schema. `data.issues` lists why. */
export class InvalidInputError extends ToolError {
  declare readonly data: { readonly tool: string; readonly issues: readonly ValidationIssue[] };

  constructor(tool: string, issues: readonly ValidationIssue[]) {
    super("invalid_input", `Invalid input for tool "${tool}": ${formatIssues(issues)}`, {
      data: { tool, issues },
    });
    this.name = "InvalidInputError";
  }
}

/** `path: message; path: message` — the issues on one line. */
export function formatIssues(issues: readonly ValidationIssue[]): string {
  return issues
    .map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : "(root)"}: ${issue.message}`)
    .join("; ");
}
