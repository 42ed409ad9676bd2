/**
 * `createRunner`: drives graphs over a store — start, resume, get, frames — one node at a time. The
 * parts work over one explicit `RunnerState`: driving (`drive.ts`), launching (`launch.ts`), resuming
 * and takeovers (`resume.ts`), the recovery sweep (`recovery.ts`), cancelling (`cancel.ts`) and
 * queries (`queries.ts`).
 */
import { ToolAbortedError } from "@tackle/core";
import { DurableError } from "../errors/durable-error.ts";
import { cancel, untilCancelled } from "./cancel.ts";
import { createExpiryDriver, type DrivingGate, drivingGateHook, startExpiryLoader } from "./expiry-load.ts";
import { launch } from "./launch.ts";
import { fork, framesOf, history, runsOf } from "./queries.ts";
import { startSweeper } from "./recovery.ts";
import { launchResume } from "./resume.ts";
import type { Runner, RunnerOptions } from "./runner-api.ts";
import { createRunnerState, getSnapshot } from "./runner-state.ts";
import { watchFrames } from "./watch-frames.ts";

export type {
  Answers,
  ClientRun,
  ExpiryOptions,
  ForkOptions,
  FramesOptions,
  Launched,
  PruneOptions,
  RecoverOptions,
  ResumeOptions,
  Runner,
  RunnerOptions,
  RunSummary,
  StartOptions,
  ThreadSummary,
} from "./runner-api.ts";
export { defaultStorePath } from "./runner-state.ts";

export function createRunner(options: RunnerOptions = {}): Runner {
  const state = createRunnerState(options, createExpiryDriver);
  const { store, active } = state;
  const sweeper = startSweeper(state, options.recover);
  const loader = startExpiryLoader(state, options.expiries);
  const runner: Runner = {
    cancel: (threadId, reason) => cancel(state, threadId, reason),
    history: (threadId, historyOptions) => history(state, threadId, historyOptions),
    fork: (threadId, forkOptions) => fork(state, threadId, forkOptions),
    runs: (threadId) => runsOf(state, threadId),
    async threads(query = {}) {
      const records = await store.listThreads(query);
      return records.map((record) => ({
        threadId: record.threadId,
        runId: record.runId,
        graph: record.graph,
        status: record.status,
        createdAt: record.createdAt,
        updatedAt: record.updatedAt,
      }));
    },
    async deleteThread(threadId) {
      const run = await store.getRun(threadId);
      if (run === undefined) return false;
      if (active.has(threadId) || run.status === "running") {
        throw new DurableError("thread_active", `Thread "${threadId}" has a running run; cancel it first`, {
          data: { runId: run.runId, status: run.status },
        });
      }
      return store.deleteThread(threadId);
    },
    async prune(pruneOptions) {
      if (!(Number.isFinite(pruneOptions.olderThanMs) && pruneOptions.olderThanMs >= 0)) {
        throw new DurableError("invalid_request", "olderThanMs is a number of milliseconds ≥ 0");
      }
      return store.pruneThreads({
        ...(pruneOptions.prefix === undefined ? {} : { prefix: pruneOptions.prefix }),
        updatedBefore: new Date(Date.now() - pruneOptions.olderThanMs).toISOString(),
        statuses: pruneOptions.statuses ?? ["completed", "failed", "cancelled"],
      });
    },
    async start(graph, input, startOptions = {}) {
      const { signal, ...launchOptions } = startOptions;
      if (signal?.aborted) throw new ToolAbortedError("durable.start", signal.reason);
      return untilCancelled(state, await launch(state, graph, input, launchOptions), signal, "durable.start");
    },
    launch: (graph, input, startOptions) => launch(state, graph, input, startOptions),
    async resume(threadId, answers, resumeOptions = {}) {
      const { signal, ...launchOptions } = resumeOptions;
      if (signal?.aborted) throw new ToolAbortedError("durable.resume", signal.reason);
      const launched = await launchResume(state, threadId, answers, launchOptions);
      return untilCancelled(state, launched, signal, "durable.resume") as never;
    },
    launchResume: (threadId, answers, resumeOptions) => launchResume(state, threadId, answers, resumeOptions),
    get: (threadId) => getSnapshot(state, threadId),
    frames: (threadId, frameOptions) => framesOf(state, threadId, frameOptions),
    watch: (threadId, watchOptions) =>
      watchFrames(store, state.landed, state.pollIntervalMs, threadId, watchOptions),
    async idle() {
      await Promise.allSettled([...active.values()]);
    },
    async close() {
      state.closed = true;
      await Promise.all([sweeper.stop(), loader.stop()]);
      state.expiries.close();
      await state.expiring.close();
      await Promise.allSettled([...active.values()]);
      if (state.ownsStore) await store.close();
    },
  };
  // `limitDrivingRuns` hands its places here: resumes at expiries then count against `maxDrivingRuns`.
  return Object.assign(runner, { [drivingGateHook]: (gate: DrivingGate) => state.expiring.useGate(gate) });
}
