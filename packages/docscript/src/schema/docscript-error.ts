/** The coded error of a document write or check: it names the entity, the path and the constraint. */
import { type NotFoundData, ToolError } from "@tackle/core";
import type { DocumentIssue } from "./types.ts";

/**
 * Codes: `schema_violation` (a write broke a constraint; `issues` say which), `document_invalid`
 * (the whole-document check failed), `not_found` (ADR 0027: `data.resource` is `document`, `entity`,
 * `relation` or `plan`, `data.id` the id asked for), `unknown_kind`, `invalid_operation` (a malformed
 * update op or path), `host_only_field`, and the document server's `document_changed`,
 * `document_unavailable`, `invalid_request`, `plan_refused`; then the edit-script bindings' refusals
 * and the ways a sandboxed script ends.
 */
export type DocScriptErrorCode =
  | "schema_violation"
  | "document_invalid"
  | "not_found"
  | "unknown_kind"
  | "invalid_operation"
  | "host_only_field"
  | "document_changed"
  | "document_unavailable"
  | "invalid_request"
  | "plan_refused"
  | "invalid_version"
  | "invalid_snapshot"
  | "refused_address"
  // the edit-script bindings and host hooks
  | "unknown_call"
  | "not_a_file"
  | "upload_unavailable"
  | "upload_failed"
  | "storage_key_missing"
  | "asset_unreadable"
  | "materialize_unavailable"
  | "asset_refused"
  | "file_key_refused"
  | "upload_refused"
  | "upload_too_large"
  | "read_limit"
  | "too_many_hook_calls"
  | "hooks_busy"
  // how a sandboxed script ended
  | "script_error"
  | "syntax_error"
  | "timeout"
  | "memory_limit"
  | "run_failed"
  | "run_ended"
  | "sandbox_closed"
  | "sandbox_crashed"
  | "unhandled_rejection"
  | "write_refused"
  | "no_host_hook";

/** What a docscript resource lookup names: `not_found`'s `data.resource`. */
export type DocScriptResource = "document" | "entity" | "relation" | "plan";

/** A DocScriptError's `data`: its issues, and for `not_found` the resource and id looked for. */
export interface DocScriptErrorData extends Partial<NotFoundData> {
  readonly issues: readonly DocumentIssue[];
}

export class DocScriptError extends ToolError<DocScriptErrorCode, DocScriptErrorData> {
  static override readonly brand: symbol = Symbol.for("tackle.docscript-error");
  readonly issues: readonly DocumentIssue[];

  constructor(
    code: DocScriptErrorCode,
    message: string,
    issues: readonly DocumentIssue[] = [],
    cause?: unknown,
    /** For `not_found`: the resource and the id looked for (ADR 0027). */
    found?: NotFoundData,
  ) {
    super(code, message, {
      data: found === undefined ? { issues } : { issues, resource: found.resource, id: found.id },
      cause,
    });
    this.name = "DocScriptError";
    this.issues = issues;
  }

  /** A lookup that found nothing (ADR 0027): `not_found` with the resource and the id asked for. */
  static notFound(
    resource: DocScriptResource,
    id: string,
    message: string,
    issues: readonly DocumentIssue[] = [],
  ): DocScriptError {
    return new DocScriptError("not_found", message, issues, undefined, { resource, id });
  }

  /** One error from a list of issues, its message naming the first few. */
  static fromIssues(code: DocScriptErrorCode, issues: readonly DocumentIssue[]): DocScriptError {
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
