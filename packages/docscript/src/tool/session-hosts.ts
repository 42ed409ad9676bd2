/**
 * The tool's host workers (ADR 0478): one per document kept ready for runs, each holding that
 * document's replica copy, run doc and projection and doing all of its runs' host work (binding calls,
 * `materialize`, the finish step). The tool's thread keeps only what it must: the replica, the hooks
 * and the document server's rows. A run ended while its host worker is still working for it (the
 * run's limit passed, or the sandbox failed) has that worker terminated: the tool's thread never waits
 * on it, the document's kept copy is dropped and the next run reads it anew.
 */
import { MessageChannel, type MessagePort, Worker } from "node:worker_threads";
import { type Logger, silentLogger } from "@tackle/core";
import type { LoroDoc, VersionVector } from "loro-crdt";
import { workerExecArgv } from "../sandbox/create-sandbox-pool.ts";
import { toFailure } from "../sandbox/run-gate.ts";
import type { HostChannel, SandboxFailure, ScriptOutcome } from "../sandbox/sandbox-protocol.ts";
import type { RowLookup, RowLookupAnswer } from "../server/document-host.ts";
import type { CacheLimits } from "./document-cache.ts";
import { defaultRunRetainedMb } from "./host-retained.ts";
import type { EditScriptPlanBody, RunSessionInput } from "./run-session.ts";
import {
  answerWaiting,
  type FromHostWorker,
  hostGone,
  hostWorking,
  overRetained,
  signalWords,
  type ToHostWorker,
} from "./session-wire.ts";

/** What a run's host work is opened with. */
export interface HostedRunRequest {
  readonly key: string;
  readonly replica: LoroDoc;
  readonly schema: { readonly module: string; readonly exportName: string };
  readonly input: RunSessionInput;
  readonly limits: CacheLimits;
  /** Rows on demand (ADR 0466) and where they are read. */
  readonly rows:
    | {
        readonly source: (lookups: readonly RowLookup[]) => Promise<RowLookupAnswer>;
        readonly wholeUpTo: number;
      }
    | undefined;
  /** The run's hooks, called on the tool's thread. */
  hook(method: string, payload: unknown): Promise<unknown>;
}

/** A run's host work, held by a host worker. */
export interface HostedRun {
  /** The run's sync binding calls go here, straight from the sandbox worker to the host worker. */
  readonly channel: HostChannel;
  callAsync(binding: string, method: string, args: readonly unknown[]): Promise<unknown>;
  finish(outcome: ScriptOutcome): Promise<EditScriptPlanBody>;
  /**
   * The run has ended: its host work is released, or, when the host worker is still working for it,
   * the worker is terminated. Returns why the host worker failed, when it did (its memory ceiling).
   */
  end(): SandboxFailure | undefined;
}

export interface SessionHosts {
  /** How the kept document `key` reads its rows, when a host worker keeps it. */
  readsOf(key: string): "on-demand" | "whole" | undefined;
  open(request: HostedRunRequest): Promise<HostedRun>;
  /** Counts for tests and benches: host workers started and terminated mid-run. */
  stats(): { readonly started: number; readonly stopped: number; readonly live: number };
  close(): Promise<void>;
}

export interface SessionHostsOptions {
  /** Heap ceiling of each host worker (MB); 1024 by default. */
  readonly memoryLimitMb?: number;
  /**
   * The bytes (MiB) one run's host work may retain: its run document's growth, its plan, its uploads
   * (ADR 0490); 256 by default. Past it the run fails `memory_limit` and its host worker is replaced.
   */
  readonly runRetainedMb?: number;
  readonly logger?: Logger;
  /** Start a worker at once, so the first document's first run does not wait for one to boot. */
  readonly warm?: boolean;
}

interface HostWorker {
  readonly worker: Worker;
  readonly ready: Promise<void>;
  key: string | undefined;
  /** The version of the replica the worker's copy holds. */
  vector: VersionVector | undefined;
  reads: "on-demand" | "whole" | undefined;
  rows: HostedRunRequest["rows"];
  readonly runs: Map<number, { signal: Int32Array; request: HostedRunRequest; pending: Set<number> }>;
  readonly pending: Map<number, { resolve(value: unknown): void; reject(error: unknown): void }>;
  failure: SandboxFailure | undefined;
  dead: boolean;
  lastUsed: number;
  stderrTail: string;
}

const workerUrl = new URL(
  import.meta.url.endsWith(".ts") ? "./session-worker.ts" : "./session-worker.js",
  import.meta.url,
);

export function createSessionHosts(options: SessionHostsOptions = {}): SessionHosts {
  const memoryLimitMb = options.memoryLimitMb ?? 1024;
  const runRetainedMb = options.runRetainedMb ?? defaultRunRetainedMb;
  const logger = options.logger ?? silentLogger;
  const byKey = new Map<string, HostWorker>();
  let spare: HostWorker | undefined;
  let closed = false;
  let nextId = 1;
  const counts = { started: 0, stopped: 0 };
  const all = new Set<HostWorker>();

  const spawn = (): HostWorker => {
    const worker = new Worker(workerUrl, {
      env: {},
      argv: [],
      execArgv: workerExecArgv(),
      resourceLimits: { maxOldGenerationSizeMb: memoryLimitMb, stackSizeMb: 4 },
      stderr: true,
      stdout: true,
    });
    worker.unref();
    counts.started++;
    const host: HostWorker = {
      worker,
      key: undefined,
      vector: undefined,
      reads: undefined,
      rows: undefined,
      runs: new Map(),
      pending: new Map(),
      failure: undefined,
      dead: false,
      lastUsed: 0,
      stderrTail: "",
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
        host.failure = {
          code: "memory_limit",
          message: `the run's host work exceeded the host worker's ${memoryLimitMb} MB heap ceiling`,
        };
      else logger.warn("docscript host worker error", { error: error.message });
    });
    worker.on("message", (message: FromHostWorker) => onMessage(host, message));
    worker.once("exit", () => gone(host));
    all.add(host);
    return host;
  };

  /** The worker has ended: every run on it is told at once, and nothing more is asked of it. */
  const gone = (host: HostWorker) => {
    host.dead = true;
    all.delete(host);
    if (host.key !== undefined && byKey.get(host.key) === host) byKey.delete(host.key);
    if (spare === host) spare = undefined;
    host.failure ??= /heap out of memory|ERR_WORKER_OUT_OF_MEMORY/i.test(host.stderrTail)
      ? {
          code: "memory_limit",
          message: `the run's host work exceeded the host worker's ${memoryLimitMb} MB heap ceiling`,
        }
      : { code: "sandbox_crashed", message: "the run's host worker ended" };
    for (const run of host.runs.values()) {
      Atomics.store(run.signal, hostGone, 1);
      Atomics.notify(run.signal, answerWaiting);
    }
    for (const waiting of host.pending.values())
      waiting.reject(Object.assign(new Error(host.failure.message), host.failure));
    host.pending.clear();
  };

  const stop = (host: HostWorker) => {
    if (host.dead) return;
    counts.stopped++;
    host.failure ??= { code: "timeout", message: "the run's host work was stopped at the run's limit" };
    gone(host);
    void host.worker.terminate();
  };

  const onMessage = (host: HostWorker, message: FromHostWorker) => {
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
    if (message.type === "hook" || message.type === "rows") {
      const work =
        message.type === "hook"
          ? (host.runs.get(message.runId)?.request.hook(message.method, message.payload) ??
            Promise.reject(Object.assign(new Error("the run has ended"), { code: "run_ended" })))
          : (host.rows?.source(message.lookups) ??
            Promise.reject(Object.assign(new Error("no rows source"), { code: "document_unavailable" })));
      void work.then(
        (value) => answer(host, { callId: message.callId, ok: true, value }),
        (error) =>
          answer(host, { callId: message.callId, ok: false, error: toFailure(error, "host_call_failed") }),
      );
    }
  };

  const answer = (
    host: HostWorker,
    reply: { callId: number; ok: boolean; value?: unknown; error?: SandboxFailure },
  ) => {
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
  };

  const request = <T>(
    host: HostWorker,
    runId: number | undefined,
    message: ToHostWorker & { callId: number },
    transfer: readonly MessagePort[] = [],
  ): Promise<T> => {
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
  };

  /** The worker for `key`: the one keeping it, else the spare (a fresh one made ready for the next). */
  const hostFor = (request: HostedRunRequest): HostWorker => {
    const kept = byKey.get(request.key);
    if (kept !== undefined && !kept.dead) {
      // A replica the kept copy is not a part of (the document was made anew): a fresh worker reads it.
      const order = kept.vector?.compare(request.replica.oplogVersion());
      if (order !== undefined && order <= 0) return kept;
      if (kept.runs.size === 0) void kept.worker.terminate();
      byKey.delete(request.key);
    }
    const host = spare ?? spawn();
    spare = closed ? undefined : spawn();
    host.key = request.key;
    byKey.set(request.key, host);
    return host;
  };

  /** Idle workers past the documents the tool keeps are ended, least recently used first. */
  const trim = (documents: number) => {
    const idle = [...byKey.values()]
      .filter((host) => host.runs.size === 0)
      .sort((a, b) => a.lastUsed - b.lastUsed);
    while (idle.length > Math.max(0, documents)) {
      const host = idle.shift()!;
      byKey.delete(host.key!);
      host.dead = true;
      all.delete(host);
      void host.worker.terminate();
    }
  };

  if (options.warm === true) spare = spawn();
  return {
    readsOf: (key) => byKey.get(key)?.reads,
    async open(run) {
      if (closed) throw Object.assign(new Error("the tool is closed"), { code: "sandbox_closed" });
      const host = hostFor(run);
      await host.ready;
      const runId = nextId++;
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
        opened = await request(
          host,
          runId,
          {
            type: "open",
            callId: nextId++,
            runId,
            key: run.key,
            update,
            schema: run.schema,
            input: run.input,
            limits: run.limits,
            retainedBytes: runRetainedMb * 2 ** 20,
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
          request(host, runId, { type: "call-async", callId: nextId++, runId, binding, method, args }),
        finish: (outcome) => request(host, runId, { type: "finish", callId: nextId++, runId, outcome }),
        end() {
          if (ended) return host.failure;
          ended = true;
          const state = host.runs.get(runId);
          const working =
            state !== undefined && (Atomics.load(state.signal, hostWorking) !== 0 || state.pending.size > 0);
          // A run over its retained bytes takes its host worker with it: the worker's memory is returned.
          const overLimit = state !== undefined && Atomics.load(state.signal, overRetained) !== 0;
          if (overLimit && !host.dead)
            host.failure = {
              code: "memory_limit",
              message: `the run's host work retained more than its limit of ${runRetainedMb} MiB (its plan, run document and uploads); nothing of it is kept`,
            };
          if (working || overLimit) stop(host);
          else {
            host.runs.delete(runId);
            if (!host.dead) host.worker.postMessage({ type: "close", runId } satisfies ToHostWorker);
            host.lastUsed = performance.now();
            trim(run.limits.documents);
          }
          port1.close();
          return host.dead ? host.failure : undefined;
        },
      };
    },
    stats: () => ({ ...counts, live: all.size }),
    async close() {
      closed = true;
      const hosts = [...all];
      all.clear();
      byKey.clear();
      spare = undefined;
      await Promise.all(hosts.map((host) => host.worker.terminate()));
    },
  };
}

const hostsByPool = new WeakMap<object, SessionHosts>();

/** The host workers of a pool's runs: those `createEditScriptPool` made, or made here on first use. */
export function sessionHostsOf(pool: object): SessionHosts {
  let hosts = hostsByPool.get(pool);
  if (hosts === undefined) {
    hosts = createSessionHosts();
    hostsByPool.set(pool, hosts);
  }
  return hosts;
}

/** Registers the host workers a pool's runs use (its maker closes them with the pool). */
export function registerSessionHosts(pool: object, hosts: SessionHosts): void {
  hostsByPool.set(pool, hosts);
}
