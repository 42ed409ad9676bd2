/** A thread's history: the run's state after each node, read back from its frames (LangGraph's state history). */

import { setOwn } from "@tackle/core/internal";
import { DurableError } from "../errors/durable-error.ts";
import type { DurableStore, Frame } from "../store/durable-store.ts";

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
  /** Only checkpoints after this seq: the last seq of the page before (ADR 0122). */
  readonly afterSeq?: number;
  /** At most this many checkpoints (default all). */
  readonly limit?: number;
  /**
   * Stop after the checkpoint whose JSON takes the checkpoints read past this many bytes (default no
   * bound): a page's bound on what a read holds, since every checkpoint carries the whole state.
   */
  readonly maxBytes?: number;
}

/** The frames a history reads. */
export const historyFrameTypes = ["run_started", "node_completed"] as const;

/**
 * Frames read per store call. A `run_started` frame carries the run's whole state, so a page of them
 * is what a history read holds at once besides the state it rebuilds (ADR 0122).
 */
const framesPerRead = 32;

/**
 * A thread's checkpoints, oldest first, from its `run_started` and `node_completed` frames read in
 * small pages: the reader holds the state being rebuilt and the checkpoints it yields, never the
 * thread's every frame or every checkpoint at once.
 */
export async function* readCheckpoints<State>(
  store: DurableStore,
  threadId: string,
  options: HistoryOptions = {},
): AsyncGenerator<Checkpoint<State>> {
  const fold = new CheckpointFold();
  const afterSeq = options.afterSeq ?? 0;
  let readAfter = 0;
  for (;;) {
    const frames = await store.readFrames(threadId, readAfter, framesPerRead, historyFrameTypes);
    for (const frame of frames) {
      readAfter = frame.seq;
      const point = fold.apply(frame);
      if (point === undefined || point.seq <= afterSeq) continue;
      if (options.runId !== undefined && options.runId !== point.runId) continue;
      // Only a checkpoint handed out is a copy of the state: the fold goes on changing its own.
      yield { ...point, state: structuredClone(point.state) as State };
    }
    if (frames.length < framesPerRead) return;
  }
}

/** The checkpoints `readCheckpoints` yields, up to `limit` and `maxBytes`. */
export async function collectCheckpoints<State>(
  store: DurableStore,
  threadId: string,
  options: HistoryOptions = {},
): Promise<Checkpoint<State>[]> {
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const maxBytes = options.maxBytes ?? Number.POSITIVE_INFINITY;
  const checkpoints: Checkpoint<State>[] = [];
  if (limit < 1) return checkpoints;
  let bytes = 0;
  for await (const checkpoint of readCheckpoints<State>(store, threadId, options)) {
    checkpoints.push(checkpoint);
    if (maxBytes !== Number.POSITIVE_INFINITY) bytes += checkpointBytes(checkpoint);
    if (checkpoints.length >= limit || bytes > maxBytes) break;
  }
  return checkpoints;
}

/** The bytes of a checkpoint's JSON as an HTTP answer carries it (BigInts as strings). */
export function checkpointBytes(checkpoint: Checkpoint<unknown>): number {
  const json = JSON.stringify(checkpoint, (_key, entry) =>
    typeof entry === "bigint" ? entry.toString() : entry,
  );
  return Buffer.byteLength(json ?? "");
}

/** Folds frames one at a time into the state they describe. */
class CheckpointFold {
  private state: Record<string, unknown> | undefined;
  private runId = "";
  private graph = "";

  /** The checkpoint this frame records (its state the fold's own, not a copy), if any. */
  apply(frame: Frame): Checkpoint<Record<string, unknown>> | undefined {
    const data = (frame.data ?? {}) as Record<string, unknown>;
    if (frame.type === "run_started") {
      this.runId = String(data.runId);
      this.graph = String(data.graph);
      if (typeof data.state !== "object" || data.state === null) {
        throw new DurableError(
          "invalid_request",
          `Run ${this.runId} was started by a version of @tackle/durable that did not record its state; it has no history`,
          { data: { runId: this.runId } },
        );
      }
      this.state = structuredClone(data.state) as Record<string, unknown>;
      const next = typeof data.next === "string" ? data.next : null;
      return { seq: frame.seq, runId: this.runId, graph: this.graph, node: null, next, state: this.state };
    }
    const state = this.state;
    if (state === undefined) return undefined;
    for (const operation of (data.stateDelta ?? []) as { op: string; path: string; value?: unknown }[]) {
      const key = operation.path.slice(1).replaceAll("~1", "/").replaceAll("~0", "~");
      if (operation.op === "remove") delete state[key];
      else setOwn(state, key, structuredClone(operation.value));
    }
    return {
      seq: frame.seq,
      runId: this.runId,
      graph: this.graph,
      node: String(data.node),
      next: typeof data.next === "string" ? data.next : null,
      state,
    };
  }
}
