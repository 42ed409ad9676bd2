/**
 * The runner's state, made explicit: what every part of the runner (driving, launching, resuming,
 * recovery, cancelling, queries) reads and changes. `createRunner` builds one and hands it to each part.
 */
import { EventEmitter } from "node:events";
import { type Logger, silentLogger } from "@tackle/core";
import { codecVersion, decodeValue, encodeValue } from "../codec/codec.ts";
import { DurableError } from "../errors/durable-error.ts";
import type { Graph } from "../graph/create-graph.ts";
import type { InterruptRequest } from "../interrupt/interrupt.ts";
import type { DurableStore } from "../store/durable-store.ts";
import { createSqliteStore } from "../stores/sqlite/sqlite-store.ts";
import { createExpiryQueue, type ExpiryQueue } from "./expiry.ts";
import type { ExpiryDriver } from "./expiry-load.ts";
import { toFrameData } from "./frame-data.ts";
import type { NodeRuntime } from "./node-context.ts";
import type { RunSnapshot } from "./run-snapshot.ts";
import type { ClientRun, RunnerOptions } from "./runner-api.ts";
import { snapshotOf } from "./snapshot-of.ts";
import type { RetryPolicy } from "./step-policy.ts";
import { checkStepOptions } from "./step-policy.ts";

/** Where runs live when no store is given: one SQLite file under the working directory. */
export const defaultStorePath = ".tackle/durable.sqlite";

export interface RunnerState {
  readonly store: DurableStore;
  /** Whether the runner opened the store itself (and so closes it). */
  readonly ownsStore: boolean;
  readonly logger: Logger;
  // biome-ignore lint/suspicious/noExplicitAny: graphs of any state shape
  readonly graphs: Map<string, Graph<any>>;
  /** The run each thread driven here is on: its promise of a snapshot, until it pauses or ends. */
  readonly active: Map<string, Promise<unknown>>;
  /** Emits a thread's id when frames of it land, for watchers in this process. */
  readonly landed: EventEmitter;
  /** The node executing now, per thread driven here: a cancel aborts its signal. */
  readonly current: Map<string, NodeRuntime>;
  /**
   * When the paused runs this runner paused, or loaded from the store, expire: one timer for the soonest
   * (ADR 0123, 0124).
   */
  readonly expiries: ExpiryQueue;
  /** Runs whose expiry fell due, resumed as driving places free (ADR 0124). */
  readonly expiring: ExpiryDriver;
  readonly pollIntervalMs: number;
  readonly leaseMs: number;
  readonly maxTakeovers: number;
  readonly maxStateBytes: number;
  readonly retry: RetryPolicy | undefined;
  closed: boolean;
}

/** Default `maxStateBytes`: 4 MiB of a run's state as journal text (ADR 0122). */
export const defaultMaxStateBytes = 4 * 1024 * 1024;

/**
 * The journal text of a state a run starts with, refused `state_too_large` past `maxStateBytes`
 * before anything is stored: each run's frames carry it whole, and the thread's next run carries it on.
 */
export function startStateText(state: RunnerState, values: object, threadId: string): string {
  const text = encodeValue(values, "the input");
  const bytes = Buffer.byteLength(text);
  if (bytes > state.maxStateBytes) {
    throw new DurableError(
      "state_too_large",
      `The state thread "${threadId}" would start its run with is ${bytes} bytes, over the ${state.maxStateBytes} a run may start with (maxStateBytes); start a new thread or send less`,
      { data: { bytes, maxBytes: state.maxStateBytes } },
    );
  }
  return text;
}

/** Where a run is in its graph: visits and tool calls per node, and the graph version it started on. */
export interface Cursor {
  visits: Record<string, number>;
  tools: Record<string, number>;
  /** The graph version the run started on (absent: 1). */
  version?: number;
}

/**
 * `expiring` makes the runner's driver of runs whose approval expired (`expiry-load.ts`, kept apart to
 * avoid a cycle); the expiry queue hands it each run that falls due.
 */
export function createRunnerState(
  options: RunnerOptions,
  expiring: (state: RunnerState) => ExpiryDriver,
): RunnerState {
  if (typeof (options.store as { then?: unknown } | undefined)?.then === "function") {
    // createPostgresStore is async: the un-awaited promise would fail later as "store.createRun is not a function".
    throw new DurableError(
      "invalid_store",
      "The store is a promise: await the store factory (`store: await createPostgresStore(...)`) before passing it to createRunner",
    );
  }
  checkStepOptions(options.retry === undefined ? undefined : { retry: options.retry }, "createRunner");
  const ownsStore = typeof options.store !== "object";
  const store =
    typeof options.store === "object"
      ? options.store
      : createSqliteStore({ path: options.store ?? defaultStorePath });
  const landed = new EventEmitter();
  landed.setMaxListeners(0);
  const state: RunnerState = {
    store,
    ownsStore,
    logger: options.logger ?? silentLogger,
    graphs: new Map((options.graphs ?? []).map((graph) => [graph.name, graph])),
    active: new Map(),
    landed,
    current: new Map(),
    expiries: createExpiryQueue((threadId) => state.expiring.due(threadId)),
    get expiring() {
      return driver;
    },
    pollIntervalMs: options.pollIntervalMs ?? 250,
    leaseMs: options.leaseMs ?? 30_000,
    maxTakeovers: Math.max(0, Math.floor(options.maxTakeovers ?? 3)),
    maxStateBytes: options.maxStateBytes ?? defaultMaxStateBytes,
    retry: options.retry,
    closed: false,
  };
  const driver = expiring(state);
  return state;
}

// biome-ignore lint/suspicious/noExplicitAny: graphs of any state shape
export function register(state: RunnerState, graph: Graph<any>): void {
  const known = state.graphs.get(graph.name);
  if (known !== undefined && known !== graph) {
    throw new DurableError("invalid_graph", `Another graph named "${graph.name}" is already registered`);
  }
  graph.entry();
  state.graphs.set(graph.name, graph);
}

export async function getSnapshot<State extends object>(
  state: RunnerState,
  threadId: string,
): Promise<RunSnapshot<State> | undefined> {
  const run = await state.store.getRun(threadId);
  if (run === undefined) return undefined;
  return snapshotOf<State>(
    run,
    decodeValue(run.state, "state") as State,
    decodeValue(run.interrupts, "interrupts") as InterruptRequest[],
  );
}

/** The stored snapshot of a run known to exist. */
export async function storedSnapshot<State extends object>(
  state: RunnerState,
  threadId: string,
): Promise<RunSnapshot<State>> {
  return (await getSnapshot<State>(state, threadId)) as RunSnapshot<State>;
}

/** Marks the thread driven here until `finished` settles. */
export function track<State extends object>(
  state: RunnerState,
  threadId: string,
  finished: Promise<RunSnapshot<State>>,
): Promise<RunSnapshot<State>> {
  state.active.set(threadId, finished);
  const forget = () => {
    if (state.active.get(threadId) === finished) state.active.delete(threadId);
  };
  finished.then(forget, forget);
  return finished;
}

export function clientRunData(clientRun: ClientRun | undefined): Record<string, unknown> {
  if (clientRun === undefined) return {};
  return {
    clientRunId: clientRun.runId,
    ...(clientRun.messages === undefined ? {} : { clientMessages: toFrameData(clientRun.messages) }),
  };
}

/**
 * The cursor is counters keyed by node name (`[A-Za-z0-9_.-]`), so its codec text is plain JSON: written
 * directly, as the codec would, without the codec's per-value walk (it is written at every transition).
 */
export function encodeCursor(cursor: Cursor): string {
  return JSON.stringify({ v: codecVersion, value: cursor });
}
