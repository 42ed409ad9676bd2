/** The primitives behind `tool()`, for integrations that run tools themselves. */
import { type NodeContext, runtimeOf } from "../runner/node-context.ts";

export type ToolCallStatus =
  | "running"
  | "completed"
  | "error"
  | "awaiting_approval"
  | "declined"
  | "cancelled";

/** The data of a `tool_call` frame; every frame of one call shares its `id`, so a client upserts. */
export interface ToolTrace {
  readonly id: string;
  readonly name: string;
  readonly status: ToolCallStatus;
  readonly params?: unknown;
  readonly result?: unknown;
  readonly error?: string;
  /** Which try of the call this is (1 unless retried or re-run after a crash). */
  readonly attempt?: number;
  /** Why a human declined the call (status `declined`). */
  readonly reason?: string;
}

/** The next replay-stable tool-call id of this node: `<node>:tool:<n>`. */
export function nextToolCallId(ctx: NodeContext): string {
  return runtimeOf(ctx).nextToolCallId();
}

/**
 * Emits a `tool_call` frame. A `running` trace opens the call (closed as awaiting approval if the run
 * pauses first); any other status closes it.
 */
export function toolTrace(ctx: NodeContext, trace: ToolTrace): void {
  const runtime = runtimeOf(ctx);
  if (trace.status === "running") {
    runtime.openToolCalls.set(trace.id, { id: trace.id, name: trace.name, params: trace.params });
  } else {
    runtime.openToolCalls.delete(trace.id);
  }
  runtime.queueFrame("tool_call", trace);
  runtime.scheduleFlush();
}
