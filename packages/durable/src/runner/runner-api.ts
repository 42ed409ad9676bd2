/** The runner's public shapes: its options, what start and resume take, and the `Runner` interface. */
import type { Logger } from "@tackle/core";
import type { Graph } from "../graph/create-graph.ts";
import type { DurableStore, Frame, OpenLimit, RunStatus, ThreadQuery } from "../store/durable-store.ts";
import type { Checkpoint, HistoryOptions } from "./history.ts";
import type { RunSnapshot } from "./run-snapshot.ts";
import type { RetryPolicy } from "./step-policy.ts";
import type { WatchOptions } from "./watch-frames.ts";

export interface RunnerOptions {
  /** A store, or the path of a SQLite file; default `.tackle/durable.sqlite` (SQLite is the default store). */
  readonly store?: DurableStore | string;
  /** Graphs this runner can resume by name (a fresh process must know them); `start` adds its own. */
  // biome-ignore lint/suspicious/noExplicitAny: graphs of any state shape
  readonly graphs?: readonly Graph<any>[];
  readonly logger?: Logger;
  /** How often a watcher polls the store for frames written by another process. Default 250 ms. */
  readonly pollIntervalMs?: number;
  /**
   * How long a run's last write vouches for its driver. A driver writes at least every third of it
   * (a heartbeat during long steps); a bare `resume` takes over a `running` run only once its last
   * write is older than this. Default 30 s; 0 disables the check (you know the old process is dead).
   */
  readonly leaseMs?: number;
  /**
   * The retry policy of every step that gives none (`ctx.step`, `tool()`, the integrations). Default: none,
   * each step tried once (a step may be a side effect that is not safe to repeat); `{}` gives every step
   * 3 tries with backoff and jitter, retrying every error but non-retryable ones.
   */
  readonly retry?: RetryPolicy;
  /**
   * The recovery sweep: every `everyMs` this runner looks for `running` runs of its graphs that have
   * written nothing for `leaseMs` by the store's clock (their driver died, or could not record the
   * run's end while the database was down) and takes up to `batch` of them over, as a bare `resume`
   * does (same claim, same fencing). On by default; `false` turns it off; off too when `leaseMs` is 0.
   */
  readonly recover?: RecoverOptions | false;
  /**
   * How many times in a row one run may be taken over (by the sweep or a bare `resume`) with no
   * progress in between before the next takeover ends it `failed` with the code `takeover_limit`
   * instead of running its step again: a "poison" run whose step kills its driver every time. Progress
   * resets the count: a step completing (or failing for good), a node completing, a pause at an
   * interrupt or a resume with answers. So a long run restarted by many deploys, or paused and resumed
   * many times, is never stopped by it. Counted from the run's `run_recovered` frames, each of which
   * records how many steps the run had completed when it was written. Default 3.
   */
  readonly maxTakeovers?: number;
  /**
   * The largest state a run may start with, in bytes of its journal text (default 4 MiB): a start, the
   * next run on a thread (its carried state with the input merged over it), a fork, past it, is refused
   * `state_too_large` (413 over HTTP, not retryable) and nothing is stored. Every run's `run_started`
   * and `run_completed` frames carry its whole state, and a thread's state carries over to its next run,
   * so without it a caller's legal starts grow a thread's storage and reads without end (ADR 0122).
   * `Infinity` turns it off.
   */
  readonly maxStateBytes?: number;
  /**
   * Approval expiries of paused runs, loaded from the store so an expiry outlives the runner that paused
   * the run (a restart, another process on the same database): at start and every `everyMs` this runner
   * reads, soonest first a page at a time, the paused runs of its graphs whose approval expires within
   * twice `everyMs`, and resumes each at its time (answered as expired) as its own pauses are. A resume
   * at an expiry takes a driving place as any resume does (`createDurableApp`'s `maxDrivingRuns`; 64 at
   * once without it) and waits for one rather than pass the bound (ADR 0124). `false` turns the loading
   * off (the runs this runner pauses still expire here).
   */
  readonly expiries?: ExpiryOptions | false;
}

/** How a runner loads the approval expiries of paused runs from its store (`RunnerOptions.expiries`). */
export interface ExpiryOptions {
  /** How often to look, in ms; expiries due within twice this are loaded. Default 30 s, at least 50 ms. */
  readonly everyMs?: number;
  /** Runs read per page. Default 256. */
  readonly pageSize?: number;
  /**
   * The most expiries held in memory at once (loaded, or due and waiting for a driving place): past it a
   * look stops, and the next one comes when the last loaded expiry falls due. Default 4096.
   */
  readonly maxLoaded?: number;
}

export interface RecoverOptions {
  /** How often to look, in ms. Default: `leaseMs`, at least 1 s. */
  readonly everyMs?: number;
  /** At most this many runs taken over per look. Default 16. */
  readonly batch?: number;
}

/** The client's own handle on one stretch of a run (an AG-UI run): recorded in its first frame. */
export interface ClientRun {
  /** The client's id for this stretch (AG-UI's `runId`); every start and resume has its own. */
  readonly runId: string;
  /**
   * The conversation the client holds, kept so a stream can restate it (edited tool arguments). Stored
   * as given: the AG-UI route first restates each tool call the thread showed as it showed it, so no
   * value a tool's `redact` masks is kept from a client's messages (ADR 0128); a caller passing its
   * own should do the same.
   */
  readonly messages?: readonly unknown[];
}

export interface StartOptions {
  readonly threadId?: string;
  /**
   * The new run's id, chosen by the caller (default: a random UUID). With a `threadId` it makes the
   * start idempotent: a start whose thread already has a run with this id (a start sent twice, a retry)
   * starts nothing and answers that run, instead of `thread_active` or a second run.
   */
  readonly runId?: string;
  readonly clientRun?: ClientRun;
  /**
   * Refuse the start `too_many_open_runs` (409, not retryable), storing nothing, when the threads whose
   * id starts with `prefix` would hold more than `max` runs running or paused. The store keeps a counter
   * per prefix, raised in the start's own transaction, so concurrent starts near the bound cannot both
   * pass; a run frees its place when it completes, fails, is cancelled or is deleted (an approval
   * answered or expired ends the pause). Only runs started under a limit hold a place (ADR 0127).
   * `createDurableApp` gives each start and fork its tenant's (`maxOpenRuns`, ADR 0123).
   */
  readonly openLimit?: OpenLimit;
  /**
   * `start` waits for the run to pause or end; this signal ends the wait (ADR 0109). Aborted before the
   * call, nothing is started; aborted while the run goes on, the run is cancelled (its steps' signals
   * abort, pending approvals are cancelled) and `start` rejects with `aborted`. `launch` ignores it:
   * stop a launched run with `cancel`.
   */
  readonly signal?: AbortSignal | undefined;
}

export interface ResumeOptions {
  readonly clientRun?: ClientRun;
  /** As `StartOptions.signal`, for `resume`: aborted before the call, no answer is recorded. */
  readonly signal?: AbortSignal | undefined;
}

export interface FramesOptions {
  readonly afterSeq?: number;
  readonly limit?: number;
  /** Only this run's frames. */
  readonly runId?: string;
  /** Only frames of these types. */
  readonly types?: readonly string[];
}

/** One run of a thread. */
export interface RunSummary {
  readonly runId: string;
  readonly graph: string;
  readonly status: RunStatus;
  /** Its first frame (`run_started`) and last frame in the thread's log (absent for the latest run). */
  readonly firstSeq: number;
  readonly lastSeq?: number;
  readonly startedAt?: string;
}

/** A thread and its latest run. */
export interface ThreadSummary {
  readonly threadId: string;
  readonly runId: string;
  readonly graph: string;
  readonly status: RunStatus;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export interface PruneOptions {
  readonly olderThanMs: number;
  /** Only threads whose id starts with this (a tenant's `<tenant>/`). */
  readonly prefix?: string;
  /** Default: completed, failed and cancelled. */
  readonly statuses?: readonly RunStatus[];
}

/** Where a fork starts and what it is called (`Runner.fork`). */
export interface ForkOptions<State extends object = Record<string, unknown>> {
  /** The checkpoint to run on from: a `seq` that `history` answered. */
  readonly seq: number;
  /** The new thread (default a random UUID); it must not exist. */
  readonly threadId?: string;
  readonly runId?: string;
  /** Merged over the checkpoint's state (edit the past before running on from it). */
  readonly input?: Partial<State>;
  /** As `StartOptions.openLimit`, for the fork's new thread. */
  readonly openLimit?: OpenLimit;
  /** As `StartOptions.signal`. */
  readonly signal?: AbortSignal | undefined;
}

/** Answers to open interrupts, by interrupt id. */
export type Answers = Readonly<Record<string, unknown>>;

export interface Launched<State> {
  readonly threadId: string;
  readonly runId: string;
  /** The seq of the frame this start or resume wrote first (0 when it wrote none: a replayed resume). */
  readonly firstSeq: number;
  /** Settles when the run pauses, completes or fails. */
  readonly finished: Promise<RunSnapshot<State>>;
}

export interface Runner {
  start<State extends object>(
    graph: Graph<State>,
    input: State,
    options?: StartOptions,
  ): Promise<RunSnapshot<State>>;
  /** As `start`, but returns once the run is durable, without waiting for it to pause or end. */
  launch<State extends object>(
    graph: Graph<State> | string,
    input: State,
    options?: StartOptions,
  ): Promise<Launched<State>>;
  /**
   * Answers the open interrupts by id (every one of them) and runs on; a run left `running` by a dead
   * process is picked up with no answers. Replaying answers already given is harmless.
   */
  resume<State extends object = Record<string, unknown>>(
    threadId: string,
    answers?: Answers,
    options?: ResumeOptions,
  ): Promise<RunSnapshot<State>>;
  /** As `resume`, but returns once the answers are durable. */
  launchResume<State extends object = Record<string, unknown>>(
    threadId: string,
    answers?: Answers,
    options?: ResumeOptions,
  ): Promise<Launched<State>>;
  get<State extends object = Record<string, unknown>>(
    threadId: string,
  ): Promise<RunSnapshot<State> | undefined>;
  /** The thread's frames (one log for all its runs), or one run's with `runId`. */
  frames(threadId: string, options?: FramesOptions): Promise<Frame[]>;
  /** Stops a running or paused run: in-flight steps' signals abort, pending approvals are cancelled. */
  cancel<State extends object = Record<string, unknown>>(
    threadId: string,
    reason?: string,
  ): Promise<RunSnapshot<State>>;
  /**
   * The thread's states step by step, oldest first: each run's start and the state after each node
   * (`runId` for one run's). Read from the frames; nothing is re-run.
   */
  history<State extends object = Record<string, unknown>>(
    threadId: string,
    options?: HistoryOptions,
  ): Promise<Checkpoint<State>[]>;
  /**
   * Time travel: a new thread that starts at a past checkpoint's state (with `input` merged over it) and
   * runs on from the node that came next there; the nodes after it run afresh. Waits as `start` does.
   */
  fork<State extends object = Record<string, unknown>>(
    threadId: string,
    options: ForkOptions<State>,
  ): Promise<RunSnapshot<State>>;
  /** The runs of a thread, oldest first. */
  runs(threadId: string): Promise<RunSummary[]>;
  /** Threads in id order (`prefix` scopes them, e.g. to a tenant's `<tenant>/`), each with its latest run. */
  threads(query?: ThreadQuery): Promise<ThreadSummary[]>;
  /** Deletes a thread that is not running, with its journal and frames; false when there was none. */
  deleteThread(threadId: string): Promise<boolean>;
  /** Deletes threads whose last write is older than `olderThanMs` (ended ones, by default); their ids. */
  prune(options: PruneOptions): Promise<string[]>;
  /** Frames as they land, from `afterSeq`; ends when the run is no longer running and every frame was read. */
  watch(threadId: string, options?: WatchOptions): AsyncIterable<Frame>;
  /** Waits for the runs this runner drives to pause or end. */
  idle(): Promise<void>;
  /** Waits until idle, then closes the store if the runner opened it (a store you passed stays open). */
  close(): Promise<void>;
}
