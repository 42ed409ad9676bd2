/** Starting runs: a new thread's first run, the next run on a thread whose last one ended, a repeat. */
import { randomUUID } from "node:crypto";
import { decodeValue, encodeValue } from "../codec/codec.ts";
import { DurableError } from "../errors/durable-error.ts";
import type { Graph } from "../graph/create-graph.ts";
import type { Frame, RunRecord } from "../store/durable-store.ts";
import { drive } from "./drive.ts";
import { toFrameData } from "./frame-data.ts";
import type { RunSnapshot } from "./run-snapshot.ts";
import type { Launched, StartOptions } from "./runner-api.ts";
import {
  type Cursor,
  clientRunData,
  encodeCursor,
  getSnapshot,
  type RunnerState,
  register,
  startStateText,
  track,
} from "./runner-state.ts";

/** Where a fork starts: the node after the checkpoint, and the checkpoint it came from. */
export interface ForkPoint {
  readonly node: string;
  readonly forkedFrom: { readonly threadId: string; readonly seq: number };
}

export async function launch<State extends object>(
  state: RunnerState,
  graphOrName: Graph<State> | string,
  input: State,
  startOptions: StartOptions = {},
  from?: ForkPoint,
): Promise<Launched<State>> {
  const { store } = state;
  const graph = typeof graphOrName === "string" ? state.graphs.get(graphOrName) : graphOrName;
  if (graph === undefined)
    throw new DurableError("unknown_graph", `No graph named "${String(graphOrName)}" is registered`);
  register(state, graph);
  if (
    startOptions.runId !== undefined &&
    (typeof startOptions.runId !== "string" || startOptions.runId === "")
  ) {
    throw new DurableError("invalid_request", "`runId` is a non-empty string");
  }
  const threadId = startOptions.threadId ?? randomUUID();
  const runId = startOptions.runId ?? randomUUID();
  const now = new Date().toISOString();
  const existing = startOptions.threadId === undefined ? undefined : await store.getRun(threadId);
  if (existing !== undefined) {
    if (startOptions.runId !== undefined && (await hasRun(state, threadId, existing, runId))) {
      return idleLaunch<State>(state, threadId, runId);
    }
    return launchNext(state, graph, input, existing, runId, startOptions);
  }
  const record: RunRecord = {
    threadId,
    runId,
    graph: graph.name,
    status: "running",
    state: startStateText(state, input, threadId),
    node: from?.node ?? graph.entry(),
    cursor: encodeCursor({ visits: {}, tools: {}, version: graph.version }),
    interrupts: encodeValue([], "interrupts"),
    error: null,
    owner: randomUUID(),
    createdAt: now,
    updatedAt: now,
  };
  const started: Frame = {
    type: "run_started",
    seq: 1,
    data: {
      threadId,
      runId,
      graph: graph.name,
      startedAt: now,
      graphVersion: graph.version,
      next: record.node,
      state: toFrameData(input),
      ...(from === undefined ? {} : { forkedFrom: from.forkedFrom }),
      ...clientRunData(startOptions.clientRun),
    },
  };
  try {
    await store.createRun(
      record,
      { frames: [started] },
      startOptions.openLimit === undefined ? {} : { openLimit: startOptions.openLimit },
    );
  } catch (error) {
    // The same start twice at once: the other one created it.
    const raced = DurableError.isInstance(error) && error.code === "thread_exists";
    const current = raced && startOptions.runId !== undefined ? await store.getRun(threadId) : undefined;
    if (current !== undefined && (await hasRun(state, threadId, current, runId))) {
      return idleLaunch<State>(state, threadId, runId);
    }
    throw error;
  }
  state.landed.emit(threadId);
  return { threadId, runId, firstSeq: 1, finished: track(state, threadId, drive<State>(state, record, 1)) };
}

/** Whether the thread has had a run with this id: its latest, or an earlier one (its `run_started`). */
async function hasRun(
  state: RunnerState,
  threadId: string,
  latest: RunRecord,
  runId: string,
): Promise<boolean> {
  if (latest.runId === runId) return true;
  // A few at a time: each `run_started` carries its run's whole state (ADR 0122).
  for (let afterSeq = 0; ; ) {
    const starts = await state.store.readFrames(threadId, afterSeq, 8, ["run_started"]);
    if (starts.some((frame) => (frame.data as { runId?: unknown } | null)?.runId === runId)) return true;
    if (starts.length < 8) return false;
    afterSeq = starts.at(-1)?.seq ?? afterSeq;
  }
}

/** The answer to a start or resume repeated: the run as it is, nothing started. */
export function idleLaunch<State extends object>(
  state: RunnerState,
  threadId: string,
  runId: string,
): Launched<State> {
  return {
    threadId,
    runId,
    firstSeq: 0,
    finished: getSnapshot<State>(state, threadId) as Promise<RunSnapshot<State>>,
  };
}

/**
 * The next run on a thread whose last run ended: the state carries over (the input is merged on top),
 * and so do the visit and tool-call counters, so journal keys and tool-call ids stay unique in the
 * thread's one journal and frame log.
 */
async function launchNext<State extends object>(
  state: RunnerState,
  graph: Graph<State>,
  input: State,
  existing: RunRecord,
  runId: string,
  startOptions: StartOptions,
): Promise<Launched<State>> {
  const { threadId } = existing;
  // Refused: the thread has a live run. Unless it is this start's own — the same start sent twice at
  // once, whose twin started the run since `existing` was read: then that run is the answer.
  const refuse = async (): Promise<Launched<State>> => {
    const latest = (await state.store.getRun(threadId)) ?? existing;
    if (startOptions.runId !== undefined && (await hasRun(state, threadId, latest, runId))) {
      return idleLaunch<State>(state, threadId, runId);
    }
    throw new DurableError(
      "thread_active",
      `Thread "${threadId}" has a ${latest.status} run (${latest.runId}); resume or cancel it before starting another`,
      { data: { runId: latest.runId, status: latest.status } },
    );
  };
  if (state.active.has(threadId) || existing.status === "running" || existing.status === "paused")
    return refuse();
  const carried = decodeValue(existing.state, "state") as object;
  const values = { ...carried, ...input };
  const claimed = await state.store.claimRun(
    threadId,
    randomUUID(),
    ["completed", "failed", "cancelled"],
    {
      run: {
        runId,
        graph: graph.name,
        status: "running",
        state: startStateText(state, values, threadId),
        node: graph.entry(),
        cursor: encodeCursor({
          ...(decodeValue(existing.cursor, "cursor") as Cursor),
          version: graph.version,
        }),
        interrupts: encodeValue([], "interrupts"),
        error: null,
      },
    },
    {
      ifOwner: existing.owner,
      ...(startOptions.openLimit === undefined ? {} : { openLimit: startOptions.openLimit }),
    },
  );
  // Another claim took the thread since it was read (this start's twin, another start): never a
  // second run from one reading (ADR 0119).
  if (claimed === undefined) return refuse();
  const started: Frame = {
    type: "run_started",
    seq: 0,
    data: {
      threadId,
      runId,
      graph: graph.name,
      startedAt: new Date().toISOString(),
      graphVersion: graph.version,
      next: graph.entry(),
      state: toFrameData(values),
      ...clientRunData(startOptions.clientRun),
    },
  };
  return {
    threadId,
    runId,
    firstSeq: claimed.lastSeq + 1,
    finished: track(state, threadId, drive<State>(state, claimed.run, claimed.lastSeq, [started])),
  };
}
