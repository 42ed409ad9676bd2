/**
 * One run's host work on a host worker (ADR 0478): the worker's copy brought up to the replica, the
 * run's session opened there with a channel the sandbox worker asks straight, and the run's end —
 * its host work released, or its worker terminated when it still works for the run or the run
 * retained more than its limit (ADR 0490).
 */
import { MessageChannel } from "node:worker_threads";
import type { LoroDoc, VersionVector } from "loro-crdt";
import { askHostWorker, type HostWorker } from "./host-worker.ts";
import type { HostedRun, HostedRunRequest } from "./session-hosts.ts";
import { hostWorking, overRetained, signalWords, type ToHostWorker, wiredRows } from "./session-wire.ts";

/** What a run needs of the session hosts that opened it. */
export interface HostedRunContext {
  readonly runRetainedMb: number;
  nextId(): number;
  /** What a fresh worker imports to hold the run's replica: a snapshot and the updates since. */
  snapshotOf(run: HostedRunRequest): Uint8Array[];
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
  const updates =
    host.vector === undefined
      ? context.snapshotOf(run)
      : [run.replica.export({ mode: "update", from: host.vector })];
  host.vector = run.replica.oplogVersion();
  host.rows = run.rows;
  host.lastRequest = run;
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
        updates,
        schema: run.schema,
        input: run.input,
        limits: run.limits,
        retainedBytes: context.runRetainedMb * 2 ** 20,
        rows: wiredRows(run.rows),
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

/** The snapshots kept for fresh host workers, by document. */
export interface KeptSnapshots {
  of(key: string, replica: LoroDoc): Uint8Array[];
  drop(key: string): void;
  clear(): void;
}

/**
 * The snapshot each kept document's last fresh host worker was given, so the next fresh one (after a
 * run's host work was stopped, or its worker replaced) gets it and the updates since. Exporting a whole
 * document is the tool's thread's work (seconds at 100k entities) that every other document's calls
 * wait on; a run that is stopped at its limit would otherwise cost it again on its document's next run.
 */
export function keptSnapshots(): KeptSnapshots {
  const kept = new Map<string, { bytes: Uint8Array; vector: VersionVector }>();
  return {
    of(key, replica) {
      const held = kept.get(key);
      const order = held?.vector.compare(replica.oplogVersion());
      if (held !== undefined && order !== undefined && order <= 0) {
        if (order === 0) return [held.bytes];
        const since = replica.export({ mode: "update", from: held.vector });
        // Far behind: a fresh snapshot costs about what the updates would, and is kept for the next.
        if (since.byteLength <= held.bytes.byteLength / 4) return [held.bytes, since];
      }
      const bytes = replica.export({ mode: "snapshot" });
      kept.set(key, { bytes, vector: replica.oplogVersion() });
      return [bytes];
    },
    drop: (key) => kept.delete(key),
    clear: () => kept.clear(),
  };
}
