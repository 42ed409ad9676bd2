/**
 * A warm pool of `worker_threads` workers that run edit scripts, each in a fresh QuickJS engine inside
 * the worker (ADR 0434): workers start without the host's environment and under a heap ceiling, are
 * recycled after a bound number of runs or after any run that hit a limit, and are watched by the host,
 * which terminates a worker that overruns the wall-clock limit. Every run has a capability: a random
 * token the worker must echo on each message about the run; the host acts on no other message.
 */
import { randomBytes } from "node:crypto";
import { MessageChannel, type MessagePort, Worker } from "node:worker_threads";
import { type Logger, silentLogger } from "@tackle/core";
import { toFailure } from "./run-gate.ts";
import type {
  HostChannel,
  HostToWorker,
  SandboxFailure,
  SandboxLog,
  SyncAnswer,
  SyncChannel,
  WorkerToHost,
} from "./sandbox-protocol.ts";

export interface SandboxPoolOptions {
  /** The module each worker loads: it exports `surface` and `createDispatcher` (see SandboxDispatcherModule). */
  readonly dispatcherModule: string | URL;
  /** Warm workers kept ready; 1 by default. */
  readonly size?: number;
  /** Memory ceiling in MB of each run's engine, and the heap ceiling of each worker; 256 by default. */
  readonly memoryLimitMb?: number;
  /** Wall-clock limit counted from the script's start; 30000 by default; a run may lower it, never raise it. */
  readonly timeoutMs?: number;
  /** Runs a worker serves before it is replaced; 50 by default. */
  readonly maxRunsPerWorker?: number;
  /** How long a run may take to load its input before the script starts; 30000 by default. */
  readonly prepareTimeoutMs?: number;
  /**
   * How long the dispatcher may take to build the result once the script has ended; 30000 by default.
   * Whatever it says, the result is due by the run's limit (counted from the script's start) plus
   * `finishGraceMs`: the finish step is the run's own work and counts against its limit.
   */
  readonly finishTimeoutMs?: number;
  /**
   * How long past a run's limit the pool waits for the worker's own report (which says where the
   * script was) before it terminates the worker; 60 by default.
   */
  readonly watchdogGraceMs?: number;
  readonly logger?: Logger;
  /** The worker entry; the engine's own by default. Benches set it to measure another engine beside it. */
  readonly workerUrl?: URL;
}

export interface SandboxRunRequest {
  readonly script: string;
  /** Structured-cloneable input handed to the dispatcher's `createDispatcher`. */
  readonly input: unknown;
  /** Lowers the pool's limit for this run; a larger value is the pool's limit. */
  readonly timeoutMs?: number;
  /** Answers the dispatcher's host calls (host-only hooks). */
  readonly onHostCall?: (method: string, payload: unknown) => Promise<unknown>;
  /**
   * Where the run's sync host calls go instead of `onHostCall` (a host worker holding the run's
   * document, ADR 0478); its port is handed over to the sandbox worker with the run.
   */
  readonly hostChannel?: HostChannel;
}

export type SandboxRunResult =
  | {
      readonly ok: true;
      readonly value: unknown;
      readonly logs: readonly SandboxLog[];
      readonly scriptMs: number;
    }
  | {
      readonly ok: false;
      readonly error: SandboxFailure;
      readonly logs: readonly SandboxLog[];
      /** From the script's start to the end of the run, when the script had started. */
      readonly scriptMs?: number;
    };

export interface SandboxPool {
  run(request: SandboxRunRequest): Promise<SandboxRunResult>;
  /** Counts for tests and metrics: workers started, recycled, and killed by the watchdog. */
  stats(): {
    readonly started: number;
    readonly recycled: number;
    readonly killed: number;
    readonly idle: number;
  };
  close(): Promise<void>;
}

interface PoolWorker {
  readonly worker: Worker;
  /** The host's end of the worker's sync channel, and the word the worker waits on. */
  readonly syncPort: MessagePort;
  readonly signal: Int32Array;
  readonly ready: Promise<void>;
  runs: number;
  dead: boolean;
  stderrTail: string;
}

// The engine ends a script at its deadline itself; the watchdog only kills a worker that failed to, so its grace
// covers the worker's report (within the 100 ms a run may overrun its limit).
const watchdogGraceMs = 60;
/** Past the run's limit, how long its finish step may still take before the run fails `timeout`. */
export const finishGraceMs = 150;

/** The worker entry beside this file: TypeScript from source, JavaScript once built. */
const workerUrl = new URL(
  import.meta.url.endsWith(".ts") ? "./sandbox-worker.ts" : "./sandbox-worker.js",
  import.meta.url,
);

/** The host's flags a worker may share (module resolution), plus the one that lets us refuse `import()` cleanly. */
export function workerExecArgv(): string[] {
  const kept: string[] = [];
  const argv = process.execArgv;
  for (let index = 0; index < argv.length; index++) {
    const flag = argv[index]!;
    if (flag.startsWith("--conditions=") || flag.startsWith("-C=")) kept.push(flag);
    else if ((flag === "--conditions" || flag === "-C") && argv[index + 1] !== undefined) {
      kept.push(flag, argv[index + 1]!);
      index++;
    }
  }
  return [...kept, "--experimental-vm-modules", "--disable-warning=ExperimentalWarning"];
}

export function createSandboxPool(options: SandboxPoolOptions): SandboxPool {
  const size = Math.max(0, options.size ?? 1);
  const memoryLimitMb = options.memoryLimitMb ?? 256;
  const defaultTimeoutMs = options.timeoutMs ?? 30_000;
  const maxRunsPerWorker = options.maxRunsPerWorker ?? 50;
  const prepareTimeoutMs = options.prepareTimeoutMs ?? 30_000;
  const finishTimeoutMs = options.finishTimeoutMs ?? 30_000;
  const logger = options.logger ?? silentLogger;
  const graceMs = options.watchdogGraceMs ?? watchdogGraceMs;
  const dispatcherModule = String(options.dispatcherModule);
  const idle: PoolWorker[] = [];
  const all = new Set<PoolWorker>();
  let closed = false;
  let nextRunId = 1;
  const counts = { started: 0, recycled: 0, killed: 0 };

  function spawn(): PoolWorker {
    const channel = new MessageChannel();
    const signal = new SharedArrayBuffer(8);
    const sync: SyncChannel = { port: channel.port2, signal };
    const worker = new Worker(options.workerUrl ?? workerUrl, {
      env: {},
      argv: [],
      execArgv: workerExecArgv(),
      workerData: { dispatcherModule, memoryLimitMb, sync },
      transferList: [channel.port2],
      resourceLimits: { maxOldGenerationSizeMb: memoryLimitMb, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 },
      stdout: true,
      stderr: true,
    });
    counts.started++;
    channel.port1.unref();
    const entry: PoolWorker = {
      worker,
      syncPort: channel.port1,
      signal: new Int32Array(signal),
      runs: 0,
      dead: false,
      stderrTail: "",
      ready: new Promise<void>((resolve, reject) => {
        const onMessage = (message: WorkerToHost) => {
          if (message.type === "ready") {
            worker.off("message", onMessage);
            resolve();
          } else if (message.type === "boot-failed") {
            worker.off("message", onMessage);
            reject(new Error(`sandbox worker failed to boot: ${message.message}`));
          }
        };
        worker.on("message", onMessage);
        worker.once("exit", (code) =>
          reject(new Error(`sandbox worker exited while booting (${code}): ${entry.stderrTail}`)),
        );
      }),
    };
    entry.ready.catch(() => {});
    worker.stdout.resume();
    worker.stderr.on("data", (chunk: Buffer) => {
      entry.stderrTail = (entry.stderrTail + chunk.toString()).slice(-2000);
    });
    worker.on("error", (error) => logger.warn("sandbox worker error", { error: error.message }));
    worker.once("exit", () => {
      channel.port1.close();
      entry.dead = true;
      all.delete(entry);
      const at = idle.indexOf(entry);
      if (at >= 0) idle.splice(at, 1);
    });
    all.add(entry);
    return entry;
  }

  function refill(): void {
    while (!closed && idle.length < size) idle.push(spawn());
  }

  function retire(entry: PoolWorker, reason: "recycled" | "killed"): void {
    counts[reason]++;
    entry.dead = true;
    void entry.worker.terminate();
    refill();
  }

  async function acquire(): Promise<PoolWorker> {
    for (;;) {
      const entry = idle.shift() ?? spawn();
      try {
        await entry.ready;
      } catch (error) {
        if (entry.dead && !closed && all.size < 64 && entry.stderrTail === "") continue;
        throw error;
      }
      if (!entry.dead) return entry;
    }
  }

  async function run(request: SandboxRunRequest): Promise<SandboxRunResult> {
    if (closed)
      return {
        ok: false,
        error: { code: "sandbox_closed", message: "the sandbox pool is closed" },
        logs: [],
      };
    const entry = await acquire();
    const runId = nextRunId++;
    const capability = randomBytes(16).toString("hex");
    const requested = request.timeoutMs;
    const timeoutMs =
      typeof requested === "number" && Number.isFinite(requested) && requested > 0
        ? Math.min(requested, defaultTimeoutMs)
        : defaultTimeoutMs;
    entry.runs++;
    return await new Promise<SandboxRunResult>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      let settled = false;
      let scriptStartedAt = 0;
      const streamedLogs: SandboxLog[] = [];
      const { worker } = entry;
      const done = (outcome: SandboxRunResult, kill: boolean) => {
        if (settled) return;
        settled = true;
        const result: SandboxRunResult =
          outcome.ok || scriptStartedAt === 0
            ? outcome
            : { ...outcome, scriptMs: performance.now() - scriptStartedAt };
        clearTimeout(timer);
        worker.off("message", onMessage);
        worker.off("exit", onExit);
        worker.off("error", onError);
        if (kill) retire(entry, "killed");
        else if (entry.runs >= maxRunsPerWorker) retire(entry, "recycled");
        else if (!closed && !entry.dead) {
          // Keep `size` warm workers; a surplus worker made for a burst retires.
          if (idle.length < size) idle.push(entry);
          else retire(entry, "recycled");
        }
        resolve(result);
      };
      const arm = (limitMs: number, failure: SandboxFailure) => {
        clearTimeout(timer);
        timer = setTimeout(() => done({ ok: false, error: failure, logs: streamedLogs }, true), limitMs);
      };
      /** Why the worker failed, when it said so before it exited (an uncaught error in its own code). */
      let crashReason: string | undefined;
      const onExit = (code: number) => {
        // Exit code 1 is also any uncaught error: only V8's own report says the heap ceiling was hit.
        const memory = /ERR_WORKER_OUT_OF_MEMORY|heap out of memory/i.test(entry.stderrTail);
        done(
          {
            ok: false,
            error: memory
              ? { code: "memory_limit", message: `the script exceeded the ${memoryLimitMb} MB heap ceiling` }
              : {
                  code: "sandbox_crashed",
                  message: `the sandbox worker exited (${code})${crashReason === undefined ? "" : `: ${crashReason}`}`,
                },
            logs: streamedLogs,
          },
          true,
        );
      };
      const onMessage = (message: WorkerToHost) => {
        if (message.type === "ready" || message.type === "boot-failed") return;
        if (message.runId !== runId || message.capability !== capability) {
          // Not this run's: refuse a host call outright, act on nothing else.
          if (message.type === "host-call") refuseHostCall(worker, message.callId);
          else if (message.type === "host-call-sync")
            answerSync(entry, {
              callId: message.callId,
              ok: false,
              error: { code: "capability_refused", message: "the call does not belong to the running run" },
            });
          return;
        }
        switch (message.type) {
          case "started":
            scriptStartedAt = performance.now();
            arm(timeoutMs + graceMs, {
              code: "timeout",
              message: `the script did not finish within ${timeoutMs} ms`,
              data: { timeoutMs },
            });
            return;
          case "script-ended": {
            // The finish step counts against the run's limit: it is due by then (plus a grace).
            const left =
              scriptStartedAt === 0
                ? finishTimeoutMs
                : scriptStartedAt + timeoutMs + finishGraceMs - performance.now();
            arm(Math.max(0, Math.min(finishTimeoutMs, left)), {
              code: "timeout",
              message: `the plan was not built within the run's limit of ${timeoutMs} ms`,
              data: { timeoutMs },
            });
            return;
          }
          case "log":
            streamedLogs.push(message.line);
            return;
          case "host-call":
            void answerHostCall(worker, request, message.callId, message.method, message.payload);
            return;
          case "host-call-sync":
            void askHost(request, message.method, message.payload).then((answer) =>
              answerSync(entry, { callId: message.callId, ...answer }),
            );
            return;
          case "result":
            done(
              message.ok
                ? {
                    ok: true,
                    value: message.value,
                    logs: message.logs,
                    scriptMs: performance.now() - scriptStartedAt,
                  }
                : {
                    ok: false,
                    error: message.error ?? { code: "run_failed", message: "the run failed" },
                    logs: message.logs,
                  },
              message.retire === true,
            );
            return;
          default:
            return;
        }
      };
      worker.on("message", onMessage);
      worker.on("exit", onExit);
      const onError = (error: Error) => {
        if (!/ERR_WORKER_OUT_OF_MEMORY/.test(String((error as { code?: string }).code))) {
          crashReason = error.message;
          return;
        }
        done(
          {
            ok: false,
            error: {
              code: "memory_limit",
              message: `the script exceeded the ${memoryLimitMb} MB heap ceiling`,
            },
            logs: streamedLogs,
          },
          true,
        );
      };
      worker.on("error", onError);
      arm(prepareTimeoutMs, {
        code: "timeout",
        message: `the run was not ready within ${prepareTimeoutMs} ms`,
      });
      const message: HostToWorker = {
        type: "run",
        runId,
        capability,
        script: request.script,
        input: request.input,
        timeoutMs,
        memoryLimitMb,
        ...(request.hostChannel === undefined ? {} : { hostChannel: request.hostChannel }),
      };
      try {
        worker.postMessage(message, request.hostChannel === undefined ? [] : [request.hostChannel.port]);
      } catch (error) {
        // An input that cannot cross to the worker fails the run at once, saying so.
        done(
          {
            ok: false,
            error: {
              code: "run_failed",
              message: `the run's input cannot cross to the sandbox worker: ${(error as Error).message}`,
            },
            logs: [],
          },
          false,
        );
      }
    });
  }

  function refuseHostCall(worker: Worker, callId: number): void {
    const answer: HostToWorker = {
      type: "host-answer",
      callId,
      ok: false,
      error: { code: "capability_refused", message: "the call does not belong to the running run" },
    };
    try {
      worker.postMessage(answer);
    } catch {
      // A worker that is gone needs no answer.
    }
  }

  /** The run's host hook's answer to one call, as data. */
  async function askHost(
    request: SandboxRunRequest,
    method: string,
    payload: unknown,
  ): Promise<{ ok: boolean; value?: unknown; error?: SandboxFailure }> {
    try {
      if (request.onHostCall === undefined)
        throw Object.assign(new Error(`no host hook answers ${method}`), { code: "no_host_hook" });
      return { ok: true, value: await request.onHostCall(method, payload) };
    } catch (error) {
      return { ok: false, error: toFailure(error, "host_call_failed") };
    }
  }

  /** Posts a sync call's answer on the worker's sync port, then wakes the worker waiting for it. */
  function answerSync(entry: PoolWorker, answer: SyncAnswer): void {
    if (entry.dead) return;
    try {
      entry.syncPort.postMessage(answer);
    } catch (error) {
      // An answer that cannot be cloned fails the call instead.
      entry.syncPort.postMessage({
        callId: answer.callId,
        ok: false,
        error: {
          code: "host_call_failed",
          message: `the host's answer cannot cross to the script: ${(error as Error).message}`,
        },
      } satisfies SyncAnswer);
    }
    Atomics.store(entry.signal, 0, 1);
    Atomics.notify(entry.signal, 0);
  }

  async function answerHostCall(
    worker: Worker,
    request: SandboxRunRequest,
    callId: number,
    method: string,
    payload: unknown,
  ): Promise<void> {
    const asked = await askHost(request, method, payload);
    const answer: HostToWorker = {
      type: "host-answer",
      callId,
      ok: asked.ok,
      ...(asked.ok ? { value: asked.value } : { error: asked.error! }),
    };
    try {
      worker.postMessage(answer);
    } catch (error) {
      // An answer that cannot cross fails the call at once (never a wait until the run's limit).
      try {
        worker.postMessage({
          type: "host-answer",
          callId,
          ok: false,
          error: {
            code: "host_call_failed",
            message: `the host's answer to ${method} cannot cross to the script: ${(error as Error).message}`,
          },
        } satisfies HostToWorker);
      } catch (again) {
        logger.debug("sandbox host answer not delivered", { error: (again as Error).message });
      }
    }
  }

  refill();
  return {
    run,
    stats: () => ({ ...counts, idle: idle.length }),
    async close() {
      closed = true;
      idle.length = 0;
      await Promise.all([...all].map((entry) => entry.worker.terminate()));
    },
  };
}
