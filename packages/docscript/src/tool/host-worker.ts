/**
 * The tool's thread's handle on one host worker (ADR 0478): booting it, asking it (`askHostWorker`),
 * answering its hooks and row reads, and telling every run on it at once when it has gone. What the
 * worker holds is in `session-worker.ts`; which worker serves which document is `session-hosts.ts`.
 */
import { type MessagePort, Worker } from "node:worker_threads";
import type { Logger } from "@tackle/core";
import type { VersionVector } from "loro-crdt";
import { workerExecArgv } from "../sandbox/create-sandbox-pool.ts";
import { toFailure } from "../sandbox/run-gate.ts";
import type { SandboxFailure } from "../sandbox/sandbox-protocol.ts";
import type { HostedRunRequest } from "./session-hosts.ts";
import { answerWaiting, type FromHostWorker, hostGone, type ToHostWorker } from "./session-wire.ts";

/** A run on a host worker, as the tool's thread tracks it. */
export interface HostWorkerRun {
  readonly signal: Int32Array;
  readonly request: HostedRunRequest;
  /** Calls of the run the worker has not answered yet. */
  readonly pending: Set<number>;
}

export interface HostWorker {
  readonly worker: Worker;
  readonly ready: Promise<void>;
  key: string | undefined;
  /** The version of the replica the worker's copy holds. */
  vector: VersionVector | undefined;
  reads: "on-demand" | "whole" | undefined;
  rows: HostedRunRequest["rows"];
  /** The last run opened on the worker: what a replacement prepares (ADR 0495). */
  lastRequest: HostedRunRequest | undefined;
  readonly runs: Map<number, HostWorkerRun>;
  readonly pending: Map<number, { resolve(value: unknown): void; reject(error: unknown): void }>;
  failure: SandboxFailure | undefined;
  dead: boolean;
  /** Past its memory bound (`recycleAboveMb`): it takes no new run and is ended once its runs have. */
  retiring: boolean;
  lastUsed: number;
  stderrTail: string;
  /** Loro's memory growth since the worker opened its document, as it last said (after a run closed). */
  grownBytes: number;
  /** Loro's memory once the worker had opened its document. */
  openBytes: number;
}

export interface HostWorkerSettings {
  readonly memoryLimitMb: number;
  readonly logger: Logger;
  /** The worker has ended (exited or was terminated). */
  onGone(host: HostWorker): void;
  /** The worker has closed a run and said what it now holds. */
  onClosed(host: HostWorker): void;
}

const workerUrl = new URL(
  import.meta.url.endsWith(".ts") ? "./session-worker.ts" : "./session-worker.js",
  import.meta.url,
);

const heapCeilingFailure = (memoryLimitMb: number): SandboxFailure => ({
  code: "memory_limit",
  message: `the run's host work exceeded the host worker's ${memoryLimitMb} MB heap ceiling`,
});

export function spawnHostWorker(settings: HostWorkerSettings): HostWorker {
  const { memoryLimitMb, logger } = settings;
  const worker = new Worker(workerUrl, {
    env: {},
    argv: [],
    execArgv: workerExecArgv(),
    // A young generation left to grow keeps 128 MiB of heap committed per worker between runs.
    resourceLimits: { maxOldGenerationSizeMb: memoryLimitMb, maxYoungGenerationSizeMb: 32, stackSizeMb: 4 },
    stderr: true,
    stdout: true,
  });
  worker.unref();
  const host: HostWorker = {
    worker,
    key: undefined,
    vector: undefined,
    reads: undefined,
    rows: undefined,
    lastRequest: undefined,
    runs: new Map(),
    pending: new Map(),
    failure: undefined,
    dead: false,
    retiring: false,
    lastUsed: 0,
    stderrTail: "",
    grownBytes: 0,
    openBytes: 0,
    ready: new Promise<void>((resolve, reject) => {
      worker.once("message", (message: FromHostWorker) =>
        message.type === "ready" ? resolve() : reject(new Error("the host worker failed to boot")),
      );
      worker.once("exit", () =>
        reject(new Error(`the host worker exited while booting: ${host.stderrTail}`)),
      );
    }),
  };
  host.ready.catch(() => {});
  worker.stdout.resume();
  worker.stderr.on("data", (chunk: Buffer) => {
    host.stderrTail = (host.stderrTail + chunk.toString()).slice(-2000);
  });
  worker.on("error", (error) => {
    if (/ERR_WORKER_OUT_OF_MEMORY/.test(String((error as { code?: string }).code)))
      host.failure = heapCeilingFailure(memoryLimitMb);
    else logger.warn("docscript host worker error", { error: error.message });
  });
  worker.on("message", (message: FromHostWorker) => onMessage(host, settings, message));
  worker.once("exit", () => {
    hostWorkerGone(host, memoryLimitMb);
    settings.onGone(host);
  });
  return host;
}

/** The worker has ended: every run on it is told at once, and nothing more is asked of it. */
export function hostWorkerGone(host: HostWorker, memoryLimitMb: number): void {
  host.dead = true;
  host.failure ??= /heap out of memory|ERR_WORKER_OUT_OF_MEMORY/i.test(host.stderrTail)
    ? heapCeilingFailure(memoryLimitMb)
    : { code: "sandbox_crashed", message: "the run's host worker ended" };
  for (const run of host.runs.values()) {
    Atomics.store(run.signal, hostGone, 1);
    Atomics.notify(run.signal, answerWaiting);
  }
  for (const waiting of host.pending.values())
    waiting.reject(Object.assign(new Error(host.failure.message), host.failure));
  host.pending.clear();
}

function onMessage(host: HostWorker, settings: HostWorkerSettings, message: FromHostWorker): void {
  if (message.type === "answer") {
    const waiting = host.pending.get(message.callId);
    if (waiting === undefined) return;
    host.pending.delete(message.callId);
    if (message.ok) waiting.resolve(message.value);
    else
      waiting.reject(
        Object.assign(new Error(message.error?.message ?? "the host worker failed"), message.error),
      );
    return;
  }
  if (message.type === "closed") {
    host.grownBytes = message.grownBytes;
    host.openBytes = message.openBytes;
    settings.onClosed(host);
    return;
  }
  if (message.type === "hook" || message.type === "rows" || message.type === "stage") {
    const work =
      message.type === "hook"
        ? (host.runs.get(message.runId)?.request.hook(message.method, message.payload) ??
          Promise.reject(Object.assign(new Error("the run has ended"), { code: "run_ended" })))
        : message.type === "stage"
          ? (host.rows?.stage?.(message.part) ?? Promise.resolve({ staged: false }))
          : (host.rows?.source(message.lookups) ??
            Promise.reject(Object.assign(new Error("no rows source"), { code: "document_unavailable" })));
    void work.then(
      (value) => answer(host, { callId: message.callId, ok: true, value }),
      (error) =>
        answer(host, { callId: message.callId, ok: false, error: toFailure(error, "host_call_failed") }),
    );
  }
}

function answer(
  host: HostWorker,
  reply: { callId: number; ok: boolean; value?: unknown; error?: SandboxFailure },
): void {
  if (host.dead) return;
  try {
    host.worker.postMessage({ type: "answer", ...reply } satisfies ToHostWorker);
  } catch (error) {
    host.worker.postMessage({
      type: "answer",
      callId: reply.callId,
      ok: false,
      error: {
        code: "host_call_failed",
        message: `the hook's answer cannot cross to the run: ${(error as Error).message}`,
      },
    } satisfies ToHostWorker);
  }
}

/** Asks the worker `message` for the run `runId` (its pending calls track it) and waits for the answer. */
export function askHostWorker<T>(
  host: HostWorker,
  runId: number | undefined,
  message: ToHostWorker & { callId: number },
  transfer: readonly MessagePort[] = [],
): Promise<T> {
  if (host.dead)
    return Promise.reject(
      Object.assign(new Error(host.failure?.message ?? "the host worker ended"), host.failure),
    );
  return new Promise<T>((resolve, reject) => {
    const pending = runId === undefined ? undefined : host.runs.get(runId)?.pending;
    pending?.add(message.callId);
    host.pending.set(message.callId, {
      resolve: (value) => {
        pending?.delete(message.callId);
        resolve(value as T);
      },
      reject: (error) => {
        pending?.delete(message.callId);
        reject(error);
      },
    });
    host.worker.postMessage(message, [...transfer]);
  });
}
