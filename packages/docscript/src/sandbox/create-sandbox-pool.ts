/**
 * A warm pool of `worker_threads` workers that run edit scripts, each in a fresh QuickJS engine inside
 * the worker (ADR 0434): workers start without the host's environment and under a heap ceiling, are
 * recycled after a bound number of runs or after any run that hit a limit, and are watched by the host,
 * which terminates a worker that overruns the wall-clock limit. Every run has a capability: a random
 * token the worker must echo on each message about the run; the host acts on no other message.
 */
import { randomBytes } from "node:crypto";
import { MessageChannel, Worker } from "node:worker_threads";
import { type Logger, silentLogger } from "@tackle/core";
import { type PoolRunSettings, type PoolWorker, runOnWorker } from "./sandbox-pool-run.ts";
import type {
  HostChannel,
  SandboxFailure,
  SandboxLog,
  SyncChannel,
  WorkerToHost,
} from "./sandbox-protocol.ts";

export { finishGraceMs } from "./sandbox-pool-run.ts";

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
  /**
   * A worker that holds more than this (MiB: its engine's WebAssembly memory, which never shrinks, and
   * its heap) after a run is replaced before its next run, returning that memory; 64 by default.
   */
  readonly recycleAboveMb?: number;
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

// The engine ends a script at its deadline itself; the watchdog only kills a worker that failed to, so its grace
// covers the worker's report (within the 100 ms a run may overrun its limit).
const watchdogGraceMs = 60;

/** The memory (MiB) a worker may hold between runs before it is replaced. */
export const defaultRecycleAboveMb = 64;

/** The worker entry beside this file: TypeScript from source, JavaScript once built. */
const workerUrl = new URL(
  import.meta.url.endsWith(".ts") ? "./sandbox-worker.ts" : "./sandbox-worker.js",
  import.meta.url,
);

/**
 * The host's flags a worker may share (module resolution; a CPU profile, so that profiling the host
 * profiles the workers it runs scripts and documents in), plus the one that lets us refuse `import()`
 * cleanly.
 */
export function workerExecArgv(): string[] {
  const kept: string[] = [];
  const argv = process.execArgv;
  for (let index = 0; index < argv.length; index++) {
    const flag = argv[index]!;
    if (flag.startsWith("--conditions=") || flag.startsWith("-C=")) kept.push(flag);
    else if (flag === "--cpu-prof" || /^--cpu-prof-(dir|interval)=/.test(flag)) kept.push(flag);
    else if ((flag === "--conditions" || flag === "-C") && argv[index + 1] !== undefined) {
      kept.push(flag, argv[index + 1]!);
      index++;
    }
  }
  return [...kept, "--experimental-vm-modules", "--disable-warning=ExperimentalWarning"];
}

/** A worker booting the engine and `dispatcherModule`; `onExit` is told once it has exited. */
function spawnWorker(
  boot: { url: URL; dispatcherModule: string; memoryLimitMb: number; logger: Logger },
  onExit: () => void,
): PoolWorker {
  const { dispatcherModule, memoryLimitMb, logger } = boot;
  const channel = new MessageChannel();
  const signal = new SharedArrayBuffer(8);
  const sync: SyncChannel = { port: channel.port2, signal };
  const worker = new Worker(boot.url, {
    env: {},
    argv: [],
    execArgv: workerExecArgv(),
    workerData: { dispatcherModule, memoryLimitMb, sync },
    transferList: [channel.port2],
    resourceLimits: { maxOldGenerationSizeMb: memoryLimitMb, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 },
    stdout: true,
    stderr: true,
  });
  channel.port1.unref();
  const entry: PoolWorker = {
    worker,
    syncPort: channel.port1,
    signal: new Int32Array(signal),
    runs: 0,
    dead: false,
    stderrTail: "",
    memoryBytes: 0,
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
    onExit();
  });
  return entry;
}

export function createSandboxPool(options: SandboxPoolOptions): SandboxPool {
  const size = Math.max(0, options.size ?? 1);
  const memoryLimitMb = options.memoryLimitMb ?? 256;
  const defaultTimeoutMs = options.timeoutMs ?? 30_000;
  const maxRunsPerWorker = options.maxRunsPerWorker ?? 50;
  const recycleAboveBytes = (options.recycleAboveMb ?? defaultRecycleAboveMb) * 2 ** 20;
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
    const entry = spawnWorker(
      { url: options.workerUrl ?? workerUrl, dispatcherModule, memoryLimitMb, logger },
      () => {
        all.delete(entry);
        const at = idle.indexOf(entry);
        if (at >= 0) idle.splice(at, 1);
      },
    );
    counts.started++;
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

  /** A run is over: its worker goes back to the pool, or is replaced. */
  function release(entry: PoolWorker, kill: boolean): void {
    if (kill) retire(entry, "killed");
    else if (entry.runs >= maxRunsPerWorker) retire(entry, "recycled");
    else if (entry.memoryBytes > recycleAboveBytes) {
      logger.debug("docscript: sandbox worker replaced past its memory bound", {
        heldMiB: Math.round(entry.memoryBytes / 2 ** 20),
        boundMiB: recycleAboveBytes / 2 ** 20,
      });
      retire(entry, "recycled");
    } else if (!closed && !entry.dead) {
      // Keep `size` warm workers; a surplus worker made for a burst retires.
      if (idle.length < size) idle.push(entry);
      else retire(entry, "recycled");
    }
  }

  const settings: PoolRunSettings = {
    graceMs,
    finishTimeoutMs,
    prepareTimeoutMs,
    memoryLimitMb,
    logger,
    release,
  };

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
    return await runOnWorker(settings, entry, request, { runId, capability, timeoutMs });
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
