/** `tool`: a side effect surfaced as `tool_call` frames and run exactly once across interrupt and resume. */
import { traceToolCall } from "@tackle/core/internal";
import { isInterrupt } from "../interrupt/interrupt.ts";
import { type NodeContext, runtimeOf, type StepInfo } from "../runner/node-context.ts";
import type { StepOptions } from "../runner/step-policy.ts";
import { nextToolCallId, toolTrace } from "./tool-trace.ts";

export interface ToolOptions extends StepOptions {
  /** What frames show as params (the real ones go to `fn`); default: `params`. */
  readonly display?: unknown;
  /** Masks the result in frames; the caller still gets the real value. */
  readonly displayResult?: (result: unknown) => unknown;
  /** Emit no frames at all. */
  readonly hidden?: boolean;
  /** The id to use; default the next replay-stable `<node>:tool:<n>`. */
  readonly id?: string;
}

/**
 * Runs `fn` once per run through `ctx.step`, inside an OpenTelemetry span, with `tool_call` frames
 * `running` → `completed` | `error`. An interrupt thrown inside `fn` is rethrown untouched.
 */
export function tool<T>(
  ctx: NodeContext,
  name: string,
  params: Record<string, unknown>,
  fn: (info: StepInfo) => T | Promise<T>,
  options: ToolOptions = {},
): Promise<T> {
  const runtime = runtimeOf(ctx);
  // Allocated before any await, so parallel calls get ids in call order on every pass.
  const id = options.id ?? nextToolCallId(ctx);
  const shownParams = options.display ?? params;
  const show = (result: unknown) =>
    options.displayResult === undefined ? result : options.displayResult(result);
  const hidden = options.hidden === true;
  let attempt = 1;
  const step = runtime.step(
    `tool:${name}`,
    (info) => traceToolCall({ name, description: name, callId: id }, async () => fn(info)),
    {
      // Frames only when fn runs: a replayed call's frames were persisted with its record.
      onStart: (info) => {
        attempt = info.attempt;
        if (!hidden) toolTrace(ctx, { id, name, status: "running", params: shownParams, attempt });
      },
      onResult: (result) => {
        if (hidden) return;
        runtime.openToolCalls.delete(id);
        runtime.queueFrame("tool_call", {
          id,
          name,
          status: "completed",
          params: shownParams,
          result: show(result),
          attempt,
        });
      },
      onError: (error) => {
        if (hidden || isInterrupt(error)) return;
        runtime.openToolCalls.delete(id);
        runtime.queueFrame("tool_call", {
          id,
          name,
          status: "error",
          params: shownParams,
          error: error instanceof Error ? error.message : String(error),
          attempt,
        });
      },
      onRetry: (error, info, delayMs) => {
        if (hidden) return;
        runtime.queueFrame("tool_call", {
          id,
          name,
          status: "running",
          params: shownParams,
          attempt: info.attempt,
          retrying: { error: error instanceof Error ? error.message : String(error), delayMs },
        });
        runtime.scheduleFlush();
      },
      onReplay: () => {
        runtime.openToolCalls.delete(id);
      },
    },
    {
      ...(options.retry === undefined ? {} : { retry: options.retry }),
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    },
  );
  return step;
}
