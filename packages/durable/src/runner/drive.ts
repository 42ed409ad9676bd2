/** Driving a run: node after node, one writer per run fenced by its owner, a heartbeat during long steps. */
import { toToolError } from "@tackle/core";
import { ownValue, setOwn } from "@tackle/core/internal";
import { decodeValue, encodeValue } from "../codec/codec.ts";
import { DurableError } from "../errors/durable-error.ts";
import type { CommitBatch, Frame, JournalRecord, RunPatch, RunRecord } from "../store/durable-store.ts";
import { firstExpiry } from "./expiry-load.ts";
import { toFrameData } from "./frame-data.ts";
import { NodeRuntime } from "./node-context.ts";
import { runNode } from "./run-node.ts";
import type { RunSnapshot } from "./run-snapshot.ts";
import { type Cursor, encodeCursor, getSnapshot, type RunnerState, storedSnapshot } from "./runner-state.ts";
import { snapshotOf } from "./snapshot-of.ts";
import { stateDeltaOf } from "./state-delta.ts";
import { checkVersion } from "./versions.ts";

type Writer = ReturnType<typeof writer>;

/**
 * One writer per run: commits in order, seqs in order, fenced by the owner token. Once a write of
 * frames, records or the run failed `unavailable` (it may or may not have landed), every later write
 * of the drive fails with it (ADR 0129): written after one that did not land, it would leave a gap in
 * the seqs and a run whose stored node and state miss the lost transition. A heartbeat writes none.
 */
function writer(state: RunnerState, threadId: string, owner: string, lastSeq: number) {
  let seq = lastSeq;
  let chain: Promise<void> = Promise.resolve();
  let lastWriteAt = Date.now();
  let lost: DurableError | undefined;
  const commit = async (batch: CommitBatch): Promise<void> => {
    if (lost !== undefined) throw lost;
    try {
      await state.store.commit(threadId, owner, batch);
    } catch (error) {
      const writes = batch.frames?.length || batch.journal?.length || batch.run !== undefined;
      if (writes && DurableError.isInstance(error) && error.code === "unavailable") lost ??= error;
      throw error;
    }
  };
  return {
    nextSeq: () => ++seq,
    get lastWriteAt() {
      return lastWriteAt;
    },
    write(batch: CommitBatch): Promise<void> {
      const written = chain.then(() => commit(batch));
      chain = written.catch(() => {});
      return written.then(() => {
        lastWriteAt = Date.now();
        if ((batch.frames?.length ?? 0) > 0) state.landed.emit(threadId);
      });
    },
  };
}

/** Drives a run, writing a heartbeat when a long step leaves the lease without a write. */
export async function drive<State extends object>(
  state: RunnerState,
  run: RunRecord,
  lastSeq: number,
  firstFrames: Frame[] = [],
): Promise<RunSnapshot<State>> {
  const out = writer(state, run.threadId, run.owner, lastSeq);
  const beat = state.leaseMs / 3;
  let ended = false;
  const heartbeat =
    state.leaseMs > 0
      ? setInterval(() => {
          // Fenced (cancelled, or taken over): the steps in flight here see their signals abort now.
          // A heartbeat answered after this drive ended (its store was slow) aborts nothing: the node
          // running on this thread now, if any, is a later drive's, which its own writes fence.
          if (Date.now() - out.lastWriteAt >= beat)
            out.write({}).catch((error: unknown) => {
              if (!ended && DurableError.isInstance(error) && error.code === "run_fenced")
                state.current.get(run.threadId)?.abort(error);
            });
        }, beat)
      : undefined;
  heartbeat?.unref();
  try {
    return await driveWith<State>(state, out, run, firstFrames);
  } finally {
    ended = true;
    clearInterval(heartbeat);
  }
}

/**
 * The frames and writes of one drive. A node's transition waits for the next commit (the next node's
 * first step, or a flush on the next turn of the event loop): one commit per node in the common case
 * (ADR 0107).
 */
class Batches {
  pending: Frame[];
  private carry: { frames: Frame[]; journal: JournalRecord[]; run: RunPatch } | undefined;
  private carryError: unknown;
  private readonly out: Writer;

  constructor(out: Writer, firstFrames: readonly Frame[]) {
    this.out = out;
    this.pending = firstFrames.map((frame) => ({ ...frame, seq: out.nextSeq() }));
  }

  /** Writes the carried transition, the pending frames and `batch` as one commit. */
  flush(batch: CommitBatch): Promise<void> {
    if (this.carryError !== undefined) return Promise.reject(this.carryError);
    const merged: CommitBatch = {
      frames: [...(this.carry?.frames ?? []), ...this.pending, ...(batch.frames ?? [])],
      journal: [...(this.carry?.journal ?? []), ...(batch.journal ?? [])],
      run: { ...this.carry?.run, ...batch.run },
    };
    this.carry = undefined;
    this.pending = [];
    return this.out.write(merged);
  }

  /** Keeps a node's transition for the next commit, flushing it on the next turn if none comes. */
  carryOver(journal: readonly JournalRecord[], run: RunPatch): void {
    this.carry = {
      frames: [...(this.carry?.frames ?? []), ...this.pending],
      journal: [...(this.carry?.journal ?? []), ...journal],
      run: { ...this.carry?.run, ...run },
    };
    this.pending = [];
    setImmediate(() => {
      if (this.carry === undefined) return;
      this.flush({}).catch((error: unknown) => {
        this.carryError ??= error;
      });
    });
  }

  /** A failure supersedes a carried write's error: the run's end is written regardless. */
  forgetCarryError(): void {
    this.carryError = undefined;
  }
}

async function failRun(
  state: RunnerState,
  run: RunRecord,
  out: Writer,
  batches: Batches,
  error: unknown,
  node: string | null,
): Promise<void> {
  const payload = {
    ...toToolError(node ?? run.graph, error).toJSON(),
    ...(node === null ? {} : { node }),
  };
  state.logger.error("durable run failed", { threadId: run.threadId, error: payload });
  batches.forgetCarryError();
  await batches.flush({
    frames: [{ type: "run_failed", seq: out.nextSeq(), data: { error: payload } }],
    run: { status: "failed", error: JSON.stringify(payload) },
  });
}

async function readJournals(state: RunnerState, threadId: string) {
  const journal = new Map<string, JournalRecord>();
  const answers = new Map<string, JournalRecord>();
  for (const record of await state.store.readJournal(threadId)) {
    if (record.key.startsWith("answer:")) answers.set(record.key.slice(7), record);
    else journal.set(record.key, record);
  }
  return { journal, answers };
}

async function driveWith<State extends object>(
  state: RunnerState,
  out: Writer,
  run: RunRecord,
  firstFrames: Frame[],
): Promise<RunSnapshot<State>> {
  const { threadId } = run;
  const batches = new Batches(out, firstFrames);
  try {
    const graph = state.graphs.get(run.graph);
    if (graph === undefined)
      throw new DurableError("unknown_graph", `No graph named "${run.graph}" is registered`);
    const { journal, answers } = await readJournals(state, threadId);
    let values = decodeValue(run.state, "state") as State;
    const cursor = decodeValue(run.cursor, "cursor") as Cursor;
    let node = run.node;
    const version = cursor.version ?? 1;
    if (node !== null) checkVersion(graph, run, version, node, ownValue(cursor.visits, node) ?? 0, journal);
    while (node !== null) {
      const fn = graph.nodeFunction(node);
      if (fn === undefined)
        throw new DurableError("invalid_graph", `Graph "${graph.name}" has no node "${node}"`);
      const visit = ownValue(cursor.visits, node) ?? 0;
      const runtime: NodeRuntime = new NodeRuntime({
        threadId,
        runId: run.runId,
        node,
        visit,
        toolBase: ownValue(cursor.tools, node) ?? 0,
        journal,
        answers,
        write: (batch) => batches.flush(batch),
        nextSeq: out.nextSeq,
        retry: state.retry,
        version,
      });
      batches.pending.push({ type: "node_started", seq: out.nextSeq(), data: { node, visit } });
      state.current.set(threadId, runtime);
      let outcome: Awaited<ReturnType<typeof runNode>>;
      try {
        outcome = await runNode(fn, values, runtime);
      } finally {
        if (state.current.get(threadId) === runtime) state.current.delete(threadId);
      }
      const { frames, journal: leftover } = runtime.drain();
      batches.pending.push(...frames);
      if (runtime.fatal !== undefined) throw runtime.fatal;
      // The heartbeat found the run fenced (taken over, or cancelled elsewhere) and aborted the node:
      // what failed is the fence's doing, and the run is no longer this driver's to fail.
      const fence: unknown = runtime.context.signal.reason;
      if (outcome.kind === "failed" && DurableError.isInstance(fence) && fence.code === "run_fenced")
        throw fence;
      if (outcome.kind === "paused") {
        await pause(state, out, batches, threadId, node, runtime, leftover);
        return snapshotOf<State>({ ...run, status: "paused", node }, values, runtime.open);
      }
      if (outcome.kind === "failed") {
        await failRun(state, run, out, batches, outcome.error, node);
        return storedSnapshot<State>(state, threadId);
      }
      const before = values;
      values = { ...values, ...(outcome.update ?? {}) };
      // Encoded first: a state the journal refuses (too deep, a function) fails naming the state's path.
      const stateText = encodeValue(values, `the state after node "${node}"`);
      const stateDelta = stateDeltaOf(before, outcome.update);
      const next = graph.next(node, values);
      // Node names are keys here: `toString` or `__proto__` is a node like any other (ADR 0121).
      setOwn(cursor.visits, node, visit + 1);
      setOwn(cursor.tools, node, (ownValue(cursor.tools, node) ?? 0) + runtime.toolCount);
      batches.pending.push({
        type: "node_completed",
        seq: out.nextSeq(),
        data: { node, visit, next, stateDelta },
      });
      if (next === null) {
        batches.pending.push({
          type: "run_completed",
          seq: out.nextSeq(),
          data: { state: toFrameData(values) },
        });
      }
      const transition: RunPatch = {
        state: stateText,
        cursor: encodeCursor(cursor),
        node: next,
        ...(next === null ? { status: "completed" as const } : {}),
      };
      if (next === null) await batches.flush({ journal: leftover, run: transition });
      else batches.carryOver(leftover, transition);
      node = next;
    }
    return snapshotOf<State>({ ...run, status: "completed", node: null }, values, []);
  } catch (error) {
    // Fenced: another runner owns the run now; writing anything would be wrong.
    if (DurableError.isInstance(error) && error.code === "run_fenced") {
      state.logger.warn("durable run taken over by another runner", { threadId });
      return storedSnapshot<State>(state, threadId);
    }
    // The database failed under a write (ADR 0129): what the run did is in its journal, and a failure
    // recorded now would end it for the database's moment. Left `running`, it is taken over after its
    // lease (the recovery sweep, a bare resume); the caller is told `unavailable`, retryable.
    if (DurableError.isInstance(error) && error.code === "unavailable") {
      state.logger.warn("durable run left to a takeover: the store failed under a write", {
        threadId,
        error: error.message,
      });
      throw error;
    }
    await failRun(state, run, out, batches, error, null).catch((writeError: unknown) => {
      state.logger.error("durable run failure could not be recorded", {
        threadId,
        error: String(writeError),
      });
    });
    const stored = await getSnapshot<State>(state, threadId).catch(() => undefined);
    if (stored !== undefined) return stored;
    throw error;
  }
}

/** A node paused at interrupts: its open tool calls' cards, the interrupt frame, the paused run. */
async function pause(
  state: RunnerState,
  out: Writer,
  batches: Batches,
  threadId: string,
  node: string,
  runtime: NodeRuntime,
  leftover: JournalRecord[],
): Promise<void> {
  for (const call of runtime.openToolCalls.values()) {
    batches.pending.push({
      type: "tool_call",
      seq: out.nextSeq(),
      data: toFrameData({ ...call, status: "awaiting_approval" }),
    });
  }
  batches.pending.push({
    type: "interrupt",
    seq: out.nextSeq(),
    data: toFrameData({ node, interrupts: runtime.open }),
  });
  // The soonest expiry is stored with the pause, so any runner on the store resumes it (ADR 0124).
  const expiresAt = firstExpiry(runtime.open);
  await batches.flush({
    journal: leftover,
    run: {
      status: "paused",
      interrupts: encodeValue(runtime.open, "the open interrupts"),
      expiresAt: expiresAt ?? null,
    },
  });
  // This runner resumes it at its expiry, with no look at the store (ADR 0123).
  if (expiresAt !== undefined) state.expiries.schedule(threadId, expiresAt);
}
