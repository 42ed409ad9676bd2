/** Reading runs: a thread's runs, its frames (per run), its history, and a fork from a checkpoint. */
import { randomUUID } from "node:crypto";
import { ToolAbortedError } from "@tackle/core";
import { DurableError } from "../errors/durable-error.ts";
import type { Frame, RunStatus } from "../store/durable-store.ts";
import { untilCancelled } from "./cancel.ts";
import { type Checkpoint, collectCheckpoints, type HistoryOptions, readCheckpoints } from "./history.ts";
import { launch } from "./launch.ts";
import type { RunSnapshot } from "./run-snapshot.ts";
import type { ForkOptions, FramesOptions, RunSummary } from "./runner-api.ts";
import type { RunnerState } from "./runner-state.ts";

const lifecycleTypes = [
  "run_started",
  "run_resumed",
  "interrupt",
  "run_completed",
  "run_failed",
  "run_cancelled",
];

const endedAs: Record<string, RunStatus> = {
  interrupt: "paused",
  run_resumed: "running",
  run_completed: "completed",
  run_failed: "failed",
  run_cancelled: "cancelled",
};

export async function runsOf(state: RunnerState, threadId: string): Promise<RunSummary[]> {
  const run = await state.store.getRun(threadId);
  if (run === undefined) throw DurableError.notFound("run", threadId, `No run for thread "${threadId}"`);
  const runs: { -readonly [K in keyof RunSummary]: RunSummary[K] }[] = [];
  let afterSeq = 0;
  for (;;) {
    // Pages of 64: `run_started` and `run_completed` frames carry their run's whole state (ADR 0122).
    const page = await state.store.readFrames(threadId, afterSeq, 64, lifecycleTypes);
    for (const frame of page) {
      const data = (frame.data ?? {}) as { runId?: unknown; graph?: unknown; startedAt?: unknown };
      if (frame.type === "run_started") {
        const previous = runs.at(-1);
        if (previous !== undefined) previous.lastSeq = frame.seq - 1;
        runs.push({
          runId: String(data.runId),
          graph: String(data.graph),
          status: "running",
          firstSeq: frame.seq,
          ...(typeof data.startedAt === "string" ? { startedAt: data.startedAt } : {}),
        });
      } else {
        const last = runs.at(-1);
        const status = endedAs[frame.type];
        if (last !== undefined && status !== undefined) last.status = status;
      }
    }
    if (page.length < 64) break;
    afterSeq = page.at(-1)?.seq ?? afterSeq;
  }
  const latest = runs.at(-1);
  if (latest !== undefined && latest.runId === run.runId) latest.status = run.status;
  return runs;
}

export async function framesOf(
  state: RunnerState,
  threadId: string,
  frameOptions: FramesOptions = {},
): Promise<Frame[]> {
  const afterSeq = frameOptions.afterSeq ?? 0;
  if (frameOptions.runId === undefined)
    return state.store.readFrames(threadId, afterSeq, frameOptions.limit, frameOptions.types);
  const entry = (await runsOf(state, threadId)).find((candidate) => candidate.runId === frameOptions.runId);
  if (entry === undefined) {
    throw DurableError.notFound(
      "run",
      frameOptions.runId,
      `Thread "${threadId}" has no run "${frameOptions.runId}"`,
    );
  }
  const frames = await state.store.readFrames(
    threadId,
    Math.max(afterSeq, entry.firstSeq - 1),
    frameOptions.limit,
    frameOptions.types,
  );
  const { lastSeq } = entry;
  return lastSeq === undefined ? frames : frames.filter((frame) => frame.seq <= lastSeq);
}

export async function history<State extends object>(
  state: RunnerState,
  threadId: string,
  historyOptions: HistoryOptions = {},
): Promise<Checkpoint<State>[]> {
  if ((await state.store.getRun(threadId)) === undefined)
    throw DurableError.notFound("run", threadId, `No run for thread "${threadId}"`);
  return collectCheckpoints<State>(state.store, threadId, historyOptions);
}

/** The checkpoint at `seq`, read as far as it and no further (a fork holds no whole history). */
async function checkpointAt<State>(
  state: RunnerState,
  threadId: string,
  seq: number,
): Promise<Checkpoint<State> | undefined> {
  if ((await state.store.getRun(threadId)) === undefined)
    throw DurableError.notFound("run", threadId, `No run for thread "${threadId}"`);
  for await (const checkpoint of readCheckpoints<State>(state.store, threadId, { afterSeq: seq - 1 }))
    return checkpoint.seq === seq ? checkpoint : undefined;
  return undefined;
}

export async function fork<State extends object>(
  state: RunnerState,
  threadId: string,
  forkOptions: ForkOptions<State>,
): Promise<RunSnapshot<State>> {
  const { seq, signal } = forkOptions;
  const checkpoint = await checkpointAt<State>(state, threadId, seq);
  if (checkpoint === undefined) {
    throw new DurableError(
      "invalid_request",
      `Thread "${threadId}" has no checkpoint at seq ${seq} (see history)`,
      {
        data: { seq },
      },
    );
  }
  if (checkpoint.next === null) {
    throw new DurableError(
      "invalid_request",
      `Nothing runs after the checkpoint at seq ${seq}: its run ended there`,
      {
        data: { seq },
      },
    );
  }
  const graph = state.graphs.get(checkpoint.graph);
  if (graph === undefined)
    throw new DurableError("unknown_graph", `No graph named "${checkpoint.graph}" is registered`);
  const newThreadId = forkOptions.threadId ?? randomUUID();
  if ((await state.store.getRun(newThreadId)) !== undefined) {
    throw new DurableError(
      "thread_exists",
      `Thread "${newThreadId}" exists; a fork starts a thread of its own`,
    );
  }
  if (signal?.aborted) throw new ToolAbortedError("durable.fork", signal.reason);
  const input = { ...checkpoint.state, ...(forkOptions.input ?? {}) } as State;
  const launched = await launch<State>(
    state,
    graph,
    input,
    {
      threadId: newThreadId,
      ...(forkOptions.runId === undefined ? {} : { runId: forkOptions.runId }),
      ...(forkOptions.openLimit === undefined ? {} : { openLimit: forkOptions.openLimit }),
    },
    { node: checkpoint.next, forkedFrom: { threadId, seq } },
  );
  return untilCancelled(state, launched, signal, "durable.fork");
}
