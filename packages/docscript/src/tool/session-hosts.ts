/**
 * The tool's host workers (ADR 0478): one per document kept ready for runs, each holding that
 * document's replica copy, run doc and projection and doing all of its runs' host work (binding calls,
 * `materialize`, the finish step). The tool's thread keeps only what it must: the replica, the hooks
 * and the document server's rows. A run ended while its host worker is still working for it (the
 * run's limit passed, or the sandbox failed) has that worker terminated: the tool's thread never waits
 * on it, the document's kept copy is dropped and the next run reads it anew.
 */
import { type Logger, silentLogger } from "@tackle/core";
import type { LoroDoc } from "loro-crdt";
import type { HostChannel, SandboxFailure, ScriptOutcome } from "../sandbox/sandbox-protocol.ts";
import type { RowLookup, RowLookupAnswer } from "../server/document-host.ts";
import type { CacheLimits } from "./document-cache.ts";
import { defaultRunRetainedMb } from "./host-retained.ts";
import {
  askHostWorker,
  type HostWorker,
  type HostWorkerSettings,
  hostWorkerGone,
  spawnHostWorker,
} from "./host-worker.ts";
import { type HostedRunContext, keptSnapshots, openHostedRun } from "./hosted-run.ts";
import type { EditScriptPlanBody, RunSessionInput } from "./run-session.ts";
import type { StagePart } from "./run-staging.ts";
import { wiredRows } from "./session-wire.ts";

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
        /** Hands the server a part of the run's update ahead of its push (ADR 0508). */
        readonly stage?: StagePart;
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
  /**
   * `replica` has taken updates (a committed plan): the workers keeping a document of it import them
   * and check their run documents out now, so the next run does not (ADR 0498). A run opened meanwhile
   * waits for it; a worker with a run on it is left to catch up when its next run opens.
   */
  catchUp(replica: LoroDoc): void;
  /**
   * `replica` is taking an update of `bytes` (a plan whose push is being checked): a worker keeping a
   * document of it that the update would take past its memory bound is replaced now, its successor
   * reading the replica while the push is checked rather than in the next run.
   */
  replaceOutgrown(replica: LoroDoc, bytes: number): void;
  /**
   * Loro's memory (bytes) the worker keeping `key` had grown by since it opened its document, as it said
   * when its last run closed (undefined before): what its bound (`recycleAboveMb`) is held to. For tests
   * and benches.
   */
  grownOf(key: string): number | undefined;
  /**
   * Counts for tests and benches: host workers started, terminated mid-run (`stopped`), replaced
   * between runs past their memory bound (`recycled`), made ready with a replaced one's document
   * (`prepared`), and caught up with their replica between runs (`caughtUp`).
   */
  stats(): {
    readonly started: number;
    readonly stopped: number;
    readonly recycled: number;
    readonly prepared: number;
    readonly caughtUp: number;
    readonly live: number;
  };
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
  /**
   * Loro's memory (MiB) a host worker may have grown since it opened its document (its run document's
   * ops, which it keeps until it makes the run document anew, and whatever runs left; WebAssembly memory
   * never shrinks) before it is replaced between runs, returning that memory; 64 by default, or a
   * quarter of the Loro memory its document took to open when that is more.
   */
  readonly recycleAboveMb?: number;
  readonly logger?: Logger;
  /** Start a worker at once, so the first document's first run does not wait for one to boot. */
  readonly warm?: boolean;
}

/**
 * The Loro growth a host worker may reach before it is replaced: `floor`, or a quarter of the memory its
 * document took to open when more, so a large document (whose re-reading costs in proportion to it) is
 * not re-read every few runs.
 */
function recycleBound(host: HostWorker, floor: number): number {
  return Math.max(floor, host.openBytes / 4);
}

/** Ends every worker at once, and takes no more (the tool closes). */
async function closeAll(
  state: { spare: HostWorker | undefined; closed: boolean },
  all: Set<HostWorker>,
  byKey: Map<string, HostWorker>,
): Promise<void> {
  state.closed = true;
  const hosts = [...all];
  all.clear();
  byKey.clear();
  state.spare = undefined;
  await Promise.all(hosts.map((host) => host.worker.terminate()));
}

/** Ends the idle workers (`end`) past `documents` kept ones, least recently used first. */
function trimIdle(byKey: Map<string, HostWorker>, documents: number, end: (host: HostWorker) => void): void {
  const idle = [...byKey.values()]
    .filter((host) => host.runs.size === 0)
    .sort((a, b) => a.lastUsed - b.lastUsed);
  while (idle.length > Math.max(0, documents)) end(idle.shift()!);
}

/**
 * Loro memory a host worker grows by per byte of an update it catches up with: its replica and its run
 * document each take the update. Measured at 100k entities: the shift's 400 KB update grew one copy by
 * ~58 MiB (~145 bytes a byte).
 */
const catchUpGrowthPerByte = 2 * 145;

/** Loro's memory (MiB) a host worker may have grown since it opened its document; past it, it is replaced. */
export const defaultHostRecycleAboveMb = 64;

/**
 * The host workers themselves: those keeping a document (by key), the spare made ready for the next
 * document, and how each one ends — retired when idle, replaced past its memory bound, stopped mid-run.
 */
function keptWorkers(options: SessionHostsOptions, memoryLimitMb: number) {
  const recycleAboveBytes = (options.recycleAboveMb ?? defaultHostRecycleAboveMb) * 2 ** 20;
  const logger = options.logger ?? silentLogger;
  const byKey = new Map<string, HostWorker>();
  const state: { spare: HostWorker | undefined; closed: boolean } = { spare: undefined, closed: false };
  const counts = { started: 0, stopped: 0, recycled: 0, prepared: 0, caughtUp: 0 };
  const all = new Set<HostWorker>();

  /** Ends an idle worker (no run on it): it leaves the kept documents and its memory is returned. */
  const retire = (host: HostWorker) => {
    if (host.key !== undefined && byKey.get(host.key) === host) byKey.delete(host.key);
    host.dead = true;
    all.delete(host);
    void host.worker.terminate();
  };

  /** Replaces an idle worker now: a fresh one reads its document before the next run asks (ADR 0495). */
  const replaceNow = (host: HostWorker) => {
    host.retiring = true;
    if (byKey.get(host.key!) === host) byKey.delete(host.key!);
    counts.recycled++;
    logger.debug("docscript: host worker replaced past its memory bound", {
      grownMiB: Math.round(host.grownBytes / 2 ** 20),
      boundMiB: Math.round(recycleBound(host, recycleAboveBytes) / 2 ** 20),
    });
    retire(host);
    // Its successor after the current turn (ADR 0510): a snapshot of the document and a run document
    // (seconds of CPU at 100k entities) are made once the commit that outgrew it has been answered.
    const run = host.lastRequest;
    if (run !== undefined) setTimeout(() => replace.prepare?.(run), 0);
  };
  /** A worker past its memory bound is replaced once no run is on it; the next run reads anew. */
  const recycleIfGrown = (host: HostWorker) => {
    if (host.dead || host.grownBytes <= recycleBound(host, recycleAboveBytes)) return;
    host.retiring = true;
    if (byKey.get(host.key!) === host) byKey.delete(host.key!);
    if (host.runs.size === 0) replaceNow(host);
  };
  /** Set by the session hosts: how a replaced worker's document is made ready again (ADR 0495). */
  const replace: { prepare?: (run: HostedRunRequest) => void } = {};
  /**
   * Whether catching `host` up with an update of `bytes` would take it past its bound: it would be
   * replaced after its next run, the run after that reading anew. It is replaced at once instead.
   */
  const outgrows = (host: HostWorker, bytes: number) =>
    host.grownBytes + bytes * catchUpGrowthPerByte > recycleBound(host, recycleAboveBytes);

  const settings: HostWorkerSettings = {
    memoryLimitMb,
    logger,
    onGone(host) {
      all.delete(host);
      if (host.key !== undefined && byKey.get(host.key) === host) byKey.delete(host.key);
      if (state.spare === host) state.spare = undefined;
    },
    onClosed: recycleIfGrown,
  };

  const spawn = (): HostWorker => {
    const host = spawnHostWorker(settings);
    counts.started++;
    all.add(host);
    return host;
  };

  const stop = (host: HostWorker) => {
    if (host.dead) return;
    counts.stopped++;
    host.failure ??= { code: "timeout", message: "the run's host work was stopped at the run's limit" };
    hostWorkerGone(host, memoryLimitMb);
    settings.onGone(host);
    void host.worker.terminate();
  };

  /** The worker for `key`: the one keeping it, else the spare (a fresh one made ready for the next). */
  const hostFor = (request: HostedRunRequest): HostWorker => {
    const kept = byKey.get(request.key);
    if (kept !== undefined && !kept.dead && !kept.retiring) {
      // A replica the kept copy is not a part of (the document was made anew): a fresh worker reads it.
      const order = kept.vector?.compare(request.replica.oplogVersion());
      if (order !== undefined && order <= 0) return kept;
      if (kept.runs.size === 0) retire(kept);
      byKey.delete(request.key);
    }
    const host = state.spare ?? spawn();
    state.spare = state.closed ? undefined : spawn();
    host.key = request.key;
    byKey.set(request.key, host);
    return host;
  };

  /** Idle workers past the documents the tool keeps are ended, least recently used first. */
  const trim = (documents: number, dropped: (key: string) => void) =>
    trimIdle(byKey, documents, (host) => {
      dropped(host.key!);
      retire(host);
    });

  /** Every worker ended at once (the tool closes). */
  const close = () => closeAll(state, all, byKey);

  if (options.warm === true) state.spare = spawn();
  return {
    byKey,
    state,
    counts,
    all,
    logger,
    recycleIfGrown,
    replace,
    outgrows,
    replaceNow,
    spawn,
    retire,
    stop,
    hostFor,
    trim,
    close,
  };
}

/** A host worker's answer to `prepare`: how it reads the document it now holds. */
interface Prepared {
  readonly reads: "on-demand" | "whole" | null;
}

/**
 * A fresh worker for `run`'s document, holding it before the next run asks (ADR 0495): a large
 * document's import and run document (seconds at 100k entities) are not paid inside that run.
 */
function prepareWorker(
  workers: ReturnType<typeof keptWorkers>,
  run: HostedRunRequest,
  ask: (host: HostWorker) => Promise<Prepared>,
): void {
  const { state, byKey, counts } = workers;
  if (state.closed || byKey.has(run.key)) return;
  const host = workers.spawn();
  counts.prepared++;
  host.key = run.key;
  host.vector = run.replica.oplogVersion();
  host.rows = run.rows;
  host.lastRequest = run;
  host.lastUsed = performance.now();
  byKey.set(run.key, host);
  void host.ready
    .then(() => ask(host))
    .then((prepared) => {
      // Known now, the next run does not ask the server's counts to decide how to read.
      host.reads = prepared.reads ?? undefined;
    })
    .catch(() => {
      // Not made ready: the next run reads anew on a fresh worker.
      if (byKey.get(run.key) === host) byKey.delete(run.key);
      if (host.runs.size === 0) workers.retire(host);
    });
}

/**
 * Sends `host` the updates of its replica since the version it holds, once it has booted (and taken
 * whatever was sent it before): posted in order with the worker's other messages, so a run opened
 * after it sends only what came after it (ADR 0498).
 */
function catchUpWorker(
  workers: ReturnType<typeof keptWorkers>,
  host: HostWorker,
  replica: LoroDoc,
  ask: (host: HostWorker, updates: Uint8Array[], run: HostedRunRequest) => Promise<unknown>,
  dropSnapshot: (key: string) => void,
): void {
  void host.ready.then(
    () => {
      const run = host.lastRequest;
      const order = host.vector?.compare(replica.oplogVersion());
      // Only between runs, on the worker's own replica, and only when it is behind.
      if (host.dead || host.retiring || host.runs.size > 0 || run?.replica !== replica) return;
      if (host.vector === undefined || order === undefined || order >= 0) return;
      const updates = [replica.export({ mode: "update", from: host.vector })];
      if (workers.outgrows(host, updates[0]?.byteLength ?? 0)) {
        // The successor reads a snapshot of the replica as it is now, not the kept one and the update.
        dropSnapshot(run.key);
        workers.replaceNow(host);
        return;
      }
      host.vector = replica.oplogVersion();
      workers.counts.caughtUp++;
      workers.logger.debug("docscript: host worker catching up with its replica between runs", {
        key: run.key,
        bytes: updates[0]?.byteLength ?? 0,
      });
      ask(host, updates, run).catch(() => {
        // What it holds is not what the tool's thread counts: it takes no more runs.
        if (workers.byKey.get(run.key) === host) workers.byKey.delete(run.key);
        if (host.runs.size === 0) workers.retire(host);
        else {
          host.failure ??= {
            code: "run_failed",
            message: "the host worker did not take the document's updates",
          };
          workers.stop(host);
        }
      });
    },
    () => {},
  );
}

export function createSessionHosts(options: SessionHostsOptions = {}): SessionHosts {
  const memoryLimitMb = options.memoryLimitMb ?? 1024;
  const runRetainedMb = options.runRetainedMb ?? defaultRunRetainedMb;
  const workers = keptWorkers(options, memoryLimitMb);
  const snapshots = keptSnapshots();
  let nextId = 1;

  workers.replace.prepare = (run) =>
    prepareWorker(workers, run, (host) =>
      askHostWorker<Prepared>(host, undefined, {
        type: "prepare",
        callId: nextId++,
        key: run.key,
        updates: snapshots.of(run.key, run.replica),
        schema: run.schema,
        limits: run.limits,
        rows: wiredRows(run.rows),
      }),
    );

  const catchUp = (host: HostWorker, updates: Uint8Array[], run: HostedRunRequest) =>
    askHostWorker(host, undefined, {
      type: "prepare",
      callId: nextId++,
      catchUp: true,
      key: run.key,
      updates,
      schema: run.schema,
      limits: run.limits,
      rows: wiredRows(run.rows),
    });

  const context: HostedRunContext = {
    runRetainedMb,
    nextId: () => nextId++,
    snapshotOf: (run) => snapshots.of(run.key, run.replica),
    stop: workers.stop,
    released(host, run) {
      // A retiring worker whose last run has ended goes now; the others wait for the worker's report.
      if (host.retiring && host.runs.size === 0) workers.recycleIfGrown(host);
      workers.trim(run.limits.documents, (key) => snapshots.drop(key));
    },
  };

  return {
    readsOf: (key) => workers.byKey.get(key)?.reads,
    async open(run) {
      if (workers.state.closed)
        throw Object.assign(new Error("the tool is closed"), { code: "sandbox_closed" });
      return await openHostedRun(context, workers.hostFor(run), run);
    },
    replaceOutgrown(replica, bytes) {
      if (workers.state.closed) return;
      for (const host of workers.byKey.values())
        void host.ready.then(
          () => {
            const run = host.lastRequest;
            if (host.dead || host.retiring || host.runs.size > 0 || run?.replica !== replica) return;
            if (!workers.outgrows(host, bytes)) return;
            snapshots.drop(run.key);
            workers.replaceNow(host);
          },
          () => {},
        );
    },
    catchUp(replica) {
      if (workers.state.closed) return;
      for (const host of workers.byKey.values())
        catchUpWorker(workers, host, replica, catchUp, (key) => snapshots.drop(key));
    },
    grownOf(key) {
      const host = workers.byKey.get(key);
      // Nothing said yet: no run has closed on it.
      return host === undefined || host.openBytes === 0 ? undefined : host.grownBytes;
    },
    stats: () => ({ ...workers.counts, live: workers.all.size }),
    async close() {
      snapshots.clear();
      await workers.close();
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
