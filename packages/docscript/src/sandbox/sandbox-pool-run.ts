/**
 * One run on one of the pool's workers: the run's message to the worker, the watchdog armed for each
 * phase (preparing, the script, the finish step), and the worker's messages about the run, acted on
 * only when they carry the run's capability.
 */
import type { MessagePort, Worker } from "node:worker_threads";
import type { Logger } from "@tackle/core";
import type { SandboxRunRequest, SandboxRunResult } from "./create-sandbox-pool.ts";
import { answerHostCall, answerSync, askHost, refuseHostCall } from "./sandbox-pool-answers.ts";
import type { HostToWorker, SandboxFailure, SandboxLog, WorkerToHost } from "./sandbox-protocol.ts";

/** Past the run's limit, how long its finish step may still take before the run fails `timeout`. */
export const finishGraceMs = 150;

export interface PoolWorker {
  readonly worker: Worker;
  /** The host's end of the worker's sync channel, and the word the worker waits on. */
  readonly syncPort: MessagePort;
  readonly signal: Int32Array;
  readonly ready: Promise<void>;
  runs: number;
  dead: boolean;
  stderrTail: string;
  /** What the worker said it holds after its last run (engine memory and heap), in bytes. */
  memoryBytes: number;
}

/** What a run needs of its pool. */
export interface PoolRunSettings {
  readonly graceMs: number;
  readonly finishTimeoutMs: number;
  readonly prepareTimeoutMs: number;
  readonly memoryLimitMb: number;
  readonly logger: Logger;
  /** The run is over: the worker goes back to the pool, or is replaced (`kill`). */
  release(entry: PoolWorker, kill: boolean): void;
}

/** The run's own facts and where it stands. */
interface RunOnWorker {
  readonly settings: PoolRunSettings;
  readonly entry: PoolWorker;
  readonly request: SandboxRunRequest;
  readonly runId: number;
  readonly capability: string;
  readonly timeoutMs: number;
  readonly streamedLogs: SandboxLog[];
  readonly resolve: (result: SandboxRunResult) => void;
  timer: NodeJS.Timeout | undefined;
  settled: boolean;
  scriptStartedAt: number;
  /** Why the worker failed, when it said so before it exited (an uncaught error in its own code). */
  crashReason: string | undefined;
  detach(): void;
}

const memoryFailure = (run: RunOnWorker): SandboxFailure => ({
  code: "memory_limit",
  message: `the script exceeded the ${run.settings.memoryLimitMb} MB heap ceiling`,
});

function done(run: RunOnWorker, outcome: SandboxRunResult, kill: boolean): void {
  if (run.settled) return;
  run.settled = true;
  const result: SandboxRunResult =
    outcome.ok || run.scriptStartedAt === 0
      ? outcome
      : { ...outcome, scriptMs: performance.now() - run.scriptStartedAt };
  clearTimeout(run.timer);
  run.detach();
  run.settings.release(run.entry, kill);
  run.resolve(result);
}

/** The watchdog: past `limitMs` the run fails with `failure` and its worker is killed. */
function arm(run: RunOnWorker, limitMs: number, failure: SandboxFailure): void {
  clearTimeout(run.timer);
  run.timer = setTimeout(
    () => done(run, { ok: false, error: failure, logs: run.streamedLogs }, true),
    limitMs,
  );
}

function onExit(run: RunOnWorker, code: number): void {
  // Exit code 1 is also any uncaught error: only V8's own report says the heap ceiling was hit.
  const memory = /ERR_WORKER_OUT_OF_MEMORY|heap out of memory/i.test(run.entry.stderrTail);
  const crashed: SandboxFailure = {
    code: "sandbox_crashed",
    message: `the sandbox worker exited (${code})${run.crashReason === undefined ? "" : `: ${run.crashReason}`}`,
  };
  done(run, { ok: false, error: memory ? memoryFailure(run) : crashed, logs: run.streamedLogs }, true);
}

function onError(run: RunOnWorker, error: Error): void {
  if (!/ERR_WORKER_OUT_OF_MEMORY/.test(String((error as { code?: string }).code))) {
    run.crashReason = error.message;
    return;
  }
  done(run, { ok: false, error: memoryFailure(run), logs: run.streamedLogs }, true);
}

/** A message of another run or capability: a host call is refused outright, nothing else acted on. */
function refuseForeign(run: RunOnWorker, message: WorkerToHost & { callId?: number }): void {
  if (message.type === "host-call") refuseHostCall(run.entry.worker, message.callId);
  else if (message.type === "host-call-sync")
    answerSync(run.entry, {
      callId: message.callId,
      ok: false,
      error: { code: "capability_refused", message: "the call does not belong to the running run" },
    });
}

function onMessage(run: RunOnWorker, message: WorkerToHost): void {
  if (message.type === "ready" || message.type === "boot-failed") return;
  if (message.runId !== run.runId || message.capability !== run.capability)
    return void refuseForeign(run, message);
  const { timeoutMs, settings } = run;
  switch (message.type) {
    case "started":
      run.scriptStartedAt = performance.now();
      return void arm(run, timeoutMs + settings.graceMs, {
        code: "timeout",
        message: `the script did not finish within ${timeoutMs} ms`,
        data: { timeoutMs },
      });
    case "script-ended": {
      // The finish step counts against the run's limit: it is due by then (plus a grace).
      const left =
        run.scriptStartedAt === 0
          ? settings.finishTimeoutMs
          : run.scriptStartedAt + timeoutMs + finishGraceMs - performance.now();
      return void arm(run, Math.max(0, Math.min(settings.finishTimeoutMs, left)), {
        code: "timeout",
        message: `the plan was not built within the run's limit of ${timeoutMs} ms`,
        data: { timeoutMs },
      });
    }
    case "log":
      run.streamedLogs.push(message.line);
      return;
    case "host-call":
      void answerHostCall(run.entry.worker, run.request, message, settings.logger);
      return;
    case "host-call-sync":
      void askHost(run.request, message.method, message.payload).then((answer) =>
        answerSync(run.entry, { callId: message.callId, ...answer }),
      );
      return;
    case "result":
      if (typeof message.memoryBytes === "number") run.entry.memoryBytes = message.memoryBytes;
      return void done(
        run,
        message.ok
          ? {
              ok: true,
              value: message.value,
              logs: message.logs,
              scriptMs: performance.now() - run.scriptStartedAt,
            }
          : {
              ok: false,
              error: message.error ?? { code: "run_failed", message: "the run failed" },
              logs: message.logs,
            },
        message.retire === true,
      );
    default:
      return;
  }
}

/** Runs `request` on `entry`'s worker and settles with its result, whatever the worker does. */
export function runOnWorker(
  settings: PoolRunSettings,
  entry: PoolWorker,
  request: SandboxRunRequest,
  identity: { readonly runId: number; readonly capability: string; readonly timeoutMs: number },
): Promise<SandboxRunResult> {
  return new Promise<SandboxRunResult>((resolve) => {
    const { worker } = entry;
    const listeners = {
      message: (message: WorkerToHost) => onMessage(run, message),
      exit: (code: number) => onExit(run, code),
      error: (error: Error) => onError(run, error),
    };
    const run: RunOnWorker = {
      settings,
      entry,
      request,
      ...identity,
      streamedLogs: [],
      resolve,
      timer: undefined,
      settled: false,
      scriptStartedAt: 0,
      crashReason: undefined,
      detach() {
        worker.off("message", listeners.message);
        worker.off("exit", listeners.exit);
        worker.off("error", listeners.error);
      },
    };
    worker.on("message", listeners.message);
    worker.on("exit", listeners.exit);
    worker.on("error", listeners.error);
    arm(run, settings.prepareTimeoutMs, {
      code: "timeout",
      message: `the run was not ready within ${settings.prepareTimeoutMs} ms`,
    });
    const message: HostToWorker = {
      type: "run",
      runId: identity.runId,
      capability: identity.capability,
      script: request.script,
      input: request.input,
      timeoutMs: identity.timeoutMs,
      memoryLimitMb: settings.memoryLimitMb,
      ...(request.hostChannel === undefined ? {} : { hostChannel: request.hostChannel }),
    };
    try {
      worker.postMessage(message, request.hostChannel === undefined ? [] : [request.hostChannel.port]);
    } catch (error) {
      // An input that cannot cross to the worker fails the run at once, saying so.
      const failure: SandboxFailure = {
        code: "run_failed",
        message: `the run's input cannot cross to the sandbox worker: ${(error as Error).message}`,
      };
      done(run, { ok: false, error: failure, logs: [] }, false);
    }
  });
}
