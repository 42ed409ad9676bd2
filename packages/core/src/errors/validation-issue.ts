/** One validation problem, in terms a model can act on. */
export interface ValidationIssue {
  /** Where the problem is, as property keys and array indexes from the root. */
  readonly path: readonly (string | number)[];
  readonly message: string;
}

/**
 * The issues an `invalid_input` or `invalid_output` error keeps: enough to act on. A model that sends
 * ten thousand wrong items reads the first twenty and how many more there were (the whole list made a
 * 600 KB error), and a key or message of a megabyte is cut to its start.
 */
export const keptIssues = 20;
const keptPathSegments = 16;
const keptKeyCharacters = 64;
const keptMessageCharacters = 300;

/** The first `keptIssues` issues, each bounded, and how many were left out. */
export function boundIssues(issues: readonly ValidationIssue[]): {
  readonly kept: ValidationIssue[];
  readonly omitted: number;
} {
  const kept = issues.slice(0, keptIssues).map((issue) => ({
    path: [
      ...issue.path
        .slice(0, keptPathSegments)
        .map((key) => (typeof key === "string" ? clip(key, keptKeyCharacters) : key)),
      ...(issue.path.length > keptPathSegments
        ? [`… ${issue.path.length - keptPathSegments} more keys`]
        : []),
    ],
    message: clip(issue.message, keptMessageCharacters),
  }));
  return { kept, omitted: Math.max(0, issues.length - keptIssues) };
}

/** `path: message; path: message` — the issues on one line, and how many more there were. */
export function formatIssues(issues: readonly ValidationIssue[], omitted = 0): string {
  const line = issues
    .map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : "(root)"}: ${issue.message}`)
    .join("; ");
  return omitted > 0 ? `${line}; and ${omitted} more issue${omitted === 1 ? "" : "s"}` : line;
}

function clip(text: string, characters: number): string {
  return text.length <= characters ? text : `${text.slice(0, characters)}… (${text.length} characters)`;
}
