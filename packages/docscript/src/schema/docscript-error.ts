/** The coded error of a document write or check: it names the entity, the path and the constraint. */
import { ToolError } from "@tackle/core";
import type { DocumentIssue } from "./types.ts";

const docScriptErrorBrand = Symbol.for("tackle.docscript-error");

/**
 * Codes: `schema_violation` (a write broke a constraint; `issues` say which), `document_invalid`
 * (the whole-document check failed), `entity_not_found`, `relation_not_found`, `unknown_kind`,
 * `invalid_operation` (a malformed update op or path), `host_only_field`.
 */
export class DocScriptError extends ToolError {
  readonly [docScriptErrorBrand] = true;
  readonly issues: readonly DocumentIssue[];

  constructor(code: string, message: string, issues: readonly DocumentIssue[] = [], cause?: unknown) {
    super(code, message, { data: { issues }, cause });
    this.name = "DocScriptError";
    this.issues = issues;
  }

  static override isInstance(value: unknown): value is DocScriptError {
    return (
      typeof value === "object" &&
      value !== null &&
      (value as Record<symbol, unknown>)[docScriptErrorBrand] === true
    );
  }

  /** One error from a list of issues, its message naming the first few. */
  static fromIssues(code: string, issues: readonly DocumentIssue[]): DocScriptError {
    const shown = issues.slice(0, 3).map(formatIssue).join("; ");
    const more = issues.length > 3 ? ` (and ${issues.length - 3} more)` : "";
    return new DocScriptError(code, `${shown}${more}`, issues);
  }
}

/** `clip c1 payload.volume: must be at most 12 [field.max]`. */
export function formatIssue(issue: DocumentIssue): string {
  const where = issue.entityId ?? issue.relationId ?? "document";
  const path = issue.path.length > 0 ? ` ${issue.path.join(".")}` : "";
  return `${where}${path}: ${issue.message} [${issue.constraint}]`;
}
