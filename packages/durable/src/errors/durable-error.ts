/** The one error class of @tackle/durable: a coded ToolError, so it crosses wires like every Tackle error. */
import { ToolError, type ToolErrorOptions } from "@tackle/core";

const durableErrorBrand = Symbol.for("tackle.durable-error");

/**
 * Codes: `journal_mismatch`, `journal_decode_failed`, `not_serializable`, `unknown_run`,
 * `thread_exists`, `unknown_graph`, `invalid_graph`, `run_active`, `run_fenced`, `run_not_paused`,
 * `unanswered_interrupts`, `unknown_interrupt`, `answer_conflict`, `duplicate_interrupt`,
 * `invalid_policy`, `node_failed`; over HTTP also `forbidden_host` (403) and `unsupported_media_type` (415).
 */
export class DurableError extends ToolError {
  readonly [durableErrorBrand] = true;

  constructor(code: string, message: string, options: ToolErrorOptions = {}) {
    super(code, message, options);
    this.name = "DurableError";
  }

  static override isInstance(value: unknown): value is DurableError {
    return (
      typeof value === "object" &&
      value !== null &&
      (value as Record<symbol, unknown>)[durableErrorBrand] === true
    );
  }
}
