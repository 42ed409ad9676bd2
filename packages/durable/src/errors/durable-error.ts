/** The one error class of @tackle/durable: a coded ToolError, so it crosses wires like every Tackle error. */
import { ToolError, type ToolErrorOptions } from "@tackle/core";

/** The codes of @tackle/durable; over HTTP also `forbidden_host` (403) and `unsupported_media_type` (415). */
export type DurableErrorCode =
  | "journal_mismatch"
  | "journal_decode_failed"
  | "not_serializable"
  | "not_found"
  | "thread_exists"
  | "unknown_graph"
  | "invalid_graph"
  | "invalid_context"
  | "invalid_request"
  | "run_active"
  | "run_fenced"
  | "run_not_paused"
  | "unanswered_interrupts"
  | "unknown_interrupt"
  | "answer_conflict"
  | "duplicate_interrupt"
  | "invalid_policy"
  | "node_failed"
  | "unauthenticated"
  | "invalid_store"
  | "step_timeout"
  | "takeover_limit"
  | "invalid_edit"
  | "approval_expired"
  | "run_cancelled"
  | "thread_active"
  | "run_not_active"
  | "too_many_runs"
  | "too_many_open_runs"
  | "too_many_requests"
  | "state_too_large"
  | "listen_failed"
  | "unreachable"
  | "unavailable"
  | "forbidden_host"
  | "unsupported_media_type";

export class DurableError extends ToolError<DurableErrorCode> {
  static override readonly brand: symbol = Symbol.for("tackle.durable-error");

  constructor(code: DurableErrorCode, message: string, options: ToolErrorOptions = {}) {
    super(code, message, options);
    this.name = "DurableError";
  }

  /** A lookup that found nothing (ADR 0027): `not_found` with the resource and the id asked for. */
  static notFound(resource: string, id: string, message: string): DurableError {
    return new DurableError("not_found", message, { data: { resource, id } });
  }
}
