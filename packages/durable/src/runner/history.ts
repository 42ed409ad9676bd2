/** A thread's history: the run's state after each node, read back from its frames (LangGraph's state history). */

import { setOwn } from "@tackle/core/internal";
import { DurableError } from "../errors/durable-error.ts";
import type { Frame } from "../store/durable-store.ts";

/** The state of a run at one point: its start, or just after a node completed. */
export interface Checkpoint<State = Record<string, unknown>> {
  /** The frame that recorded it: pass it to `fork` to run on from here. */
  readonly seq: number;
  readonly runId: string;
  readonly graph: string;
  /** The node that just completed, or null at the run's start. */
  readonly node: string | null;
  /** The node that runs next from here, or null at the run's end. */
  readonly next: string | null;
  readonly state: State;
}

export interface HistoryOptions {
  /** Only this run's checkpoints. */
  readonly runId?: string;
}

/** The frames `checkpointsOf` reads. */
export const historyFrameTypes = ["run_started", "node_completed"] as const;

/** Rebuilds the checkpoints from a thread's `run_started` and `node_completed` frames, oldest first. */
export function checkpointsOf<State>(
  frames: readonly Frame[],
  options: HistoryOptions = {},
): Checkpoint<State>[] {
  const checkpoints: Checkpoint<State>[] = [];
  let state: Record<string, unknown> | undefined;
  let runId = "";
  let graph = "";
  for (const frame of frames) {
    const data = (frame.data ?? {}) as Record<string, unknown>;
    if (frame.type === "run_started") {
      runId = String(data.runId);
      graph = String(data.graph);
      if (typeof data.state !== "object" || data.state === null) {
        throw new DurableError(
          "invalid_request",
          `Run ${runId} was started by a version of @tackle/durable that did not record its state; it has no history`,
          { data: { runId } },
        );
      }
      state = structuredClone(data.state) as Record<string, unknown>;
      const next = typeof data.next === "string" ? data.next : null;
      if (options.runId === undefined || options.runId === runId)
        checkpoints.push({
          seq: frame.seq,
          runId,
          graph,
          node: null,
          next,
          state: structuredClone(state) as State,
        });
      continue;
    }
    if (state === undefined) continue;
    for (const operation of (data.stateDelta ?? []) as { op: string; path: string; value?: unknown }[]) {
      const key = operation.path.slice(1).replaceAll("~1", "/").replaceAll("~0", "~");
      if (operation.op === "remove") delete state[key];
      else setOwn(state, key, structuredClone(operation.value));
    }
    if (options.runId !== undefined && options.runId !== runId) continue;
    checkpoints.push({
      seq: frame.seq,
      runId,
      graph,
      node: String(data.node),
      next: typeof data.next === "string" ? data.next : null,
      state: structuredClone(state) as State,
    });
  }
  return checkpoints;
}
