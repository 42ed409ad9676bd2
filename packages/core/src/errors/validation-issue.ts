/** One validation problem, in terms a model can act on. */
export interface ValidationIssue {
  /** Where the problem is, as property keys and array indexes from the root. */
  readonly path: readonly (string | number)[];
  readonly message: string;
}

/** `path: message; path: message` — the issues on one line. */
export function formatIssues(issues: readonly ValidationIssue[]): string {
  return issues
    .map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : "(root)"}: ${issue.message}`)
    .join("; ");
}
