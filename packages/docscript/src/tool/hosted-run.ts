/**
 * One run's host work on a host worker (ADR 0478): the worker's copy brought up to the replica, the
 * run's session opened there with a channel the sandbox worker asks straight, and the run's end —
 * its host work released, or its worker terminated when it still works for the run or the run
 * retained more than its limit (ADR 0490).
 */
import { MessageChannel } from "node:worker_threads";
import { askHostWorker, type HostWorker } from "./host-worker.ts";
import type { HostedRun, HostedRunRequest } from "./session-hosts.ts";
import { hostWorking, overRetained, signalWords, type ToHostWorker } from "./session-wire.ts";

/** What a run needs of the session hosts that opened it. */
export interface HostedRunContext {
  readonly runRetainedMb: number;
  nextId(): number;
  /** Terminates `host` because a run ended while it worked for it (or past its retained bytes). */
  stop(host: HostWorker): void;
  /** A run on `host` ended and its host work was released. */
  released(host: HostWorker, run: HostedRunRequest): void;
}

export async function openHostedRun(
  context: HostedRunContext,
  host: HostWorker,
  run: HostedRunRequest,
): Promise<HostedRun> {
  await host.ready;
  const runId = context.nextId();
  const { port1, port2 } = new MessageChannel();
  const signal = new SharedArrayBuffer(4 * signalWords);
  const update =
    host.vector === undefined
      ? run.replica.export({ mode: "snapshot" })
      : run.replica.export({ mode: "update", from: host.vector });
  host.vector = run.replica.oplogVersion();
  host.rows = run.rows;
  host.lastUsed = performance.now();
  const words = new Int32Array(signal);
  host.runs.set(runId, { signal: words, request: run, pending: new Set() });
  let opened: { reads: "on-demand" | "whole" | null };
  try {
    opened = await askHostWorker(
      host,
      runId,
      {
        type: "open",
        callId: context.nextId(),
        runId,
        key: run.key,
        update,
        schema: run.schema,
        input: run.input,
        limits: run.limits,
        retainedBytes: context.runRetainedMb * 2 ** 20,
        rows: run.rows === undefined ? undefined : { wholeUpTo: run.rows.wholeUpTo },
        port: port2,
        signal,
      },
      [port2],
    );
  } catch (error) {
    host.runs.delete(runId);
    port1.close();
    throw error;
  }
  host.reads = opened.reads ?? undefined;
  let ended = false;
  return {
    channel: { port: port1, signal },
    callAsync: (binding, method, args) =>
      askHostWorker(host, runId, {
        type: "call-async",
        callId: context.nextId(),
        runId,
        binding,
        method,
        args,
      }),
    finish: (outcome) =>
      askHostWorker(host, runId, { type: "finish", callId: context.nextId(), runId, outcome }),
    end() {
      if (ended) return host.failure;
      ended = true;
      endRun(context, host, runId, run);
      port1.close();
      return host.dead ? host.failure : undefined;
    },
  };
}

function endRun(context: HostedRunContext, host: HostWorker, runId: number, run: HostedRunRequest): void {
  const state = host.runs.get(runId);
  const working =
    state !== undefined && (Atomics.load(state.signal, hostWorking) !== 0 || state.pending.size > 0);
  // A run over its retained bytes takes its host worker with it: the worker's memory is returned.
  const overLimit = state !== undefined && Atomics.load(state.signal, overRetained) !== 0;
  if (overLimit && !host.dead)
    host.failure = {
      code: "memory_limit",
      message: `the run's host work retained more than its limit of ${context.runRetainedMb} MiB (its plan, run document and uploads); nothing of it is kept`,
    };
  if (working || overLimit) {
    context.stop(host);
    return;
  }
  host.runs.delete(runId);
  if (!host.dead) host.worker.postMessage({ type: "close", runId } satisfies ToHostWorker);
  host.lastUsed = performance.now();
  context.released(host, run);
}
