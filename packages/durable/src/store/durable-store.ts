/** What a runner needs from storage: runs, their journal and their frames, written in atomic batches. */
import { DurableError } from "../errors/durable-error.ts";

export type RunStatus = "running" | "paused" | "completed" | "failed" | "cancelled";

/** One frame of a run's progress, as a client sees it. */
export interface Frame {
  readonly type: string;
  /** Strictly increasing per run, persisted: a reader reconnects from any seq. */
  readonly seq: number;
  readonly data: unknown;
}

/** A run as stored; `state`, `interrupts` and `error` are codec text. */
export interface RunRecord {
  readonly threadId: string;
  readonly runId: string;
  readonly graph: string;
  readonly status: RunStatus;
  /** Codec text of the run's state. */
  readonly state: string;
  /** The node to run next, or null when the run has ended. */
  readonly node: string | null;
  /** Codec text of the run's bookkeeping: visit and tool-call counters per node. */
  readonly cursor: string;
  /** Codec text of the open interrupts (`[]` when none). */
  readonly interrupts: string;
  /** JSON of the failure payload, or null. */
  readonly error: string | null;
  /** Fencing token of the process driving the run. */
  readonly owner: string;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export type JournalState = "started" | "done" | "failed" | "interrupted";

/** One journal entry: a step's outcome (or its start), or an interrupt's answer. */
export interface JournalRecord {
  readonly key: string;
  readonly name: string;
  readonly state: JournalState;
  readonly attempt: number;
  /** Codec text of the result, the error or the answer; null while started. */
  readonly value: string | null;
}

export type RunPatch = Partial<
  Pick<
    RunRecord,
    "runId" | "graph" | "status" | "state" | "node" | "cursor" | "interrupts" | "error" | "owner"
  >
> & {
  /**
   * When the run's soonest open approval expires (ms since the epoch), null when none does: written
   * with a pause, read only while the run is paused (`findExpiringRuns`, ADR 0124).
   */
  readonly expiresAt?: number | null;
};

/** Which threads to list or prune: ids starting with `prefix` (a tenant's `<tenant>/`). */
export interface ThreadQuery {
  readonly prefix?: string;
  /** List only: thread ids after this one (a cursor). */
  readonly after?: string;
  readonly limit?: number;
}

/** Everything one commit writes, atomically. */
export interface CommitBatch {
  readonly frames?: readonly Frame[];
  readonly journal?: readonly JournalRecord[];
  readonly run?: RunPatch;
}

export interface ClaimOptions {
  /**
   * Take the run only if its last write is at least this old, judged in the same transaction by the
   * store's clock (the database's on PostgreSQL, never the callers'); else throw `run_active`
   * (retryable, `data.retryAfterMs`).
   */
  readonly staleAfterMs?: number;
  /**
   * Take the run only if its owner token is still this one — no other claim (a resume, a start, a
   * takeover, a cancel) took it since the caller read it — else answer undefined, as for a status that
   * does not match. Two claims made from one reading of the run: one wins, the other reads again.
   */
  readonly ifOwner?: string;
  /** Refuse the claim `too_many_open_runs` when it would make more open runs than this allows. */
  readonly openLimit?: OpenLimit;
}

/**
 * At most `max` open runs (`running` or `paused`) among the threads whose id starts with `prefix` (a
 * tenant's `<tenant>/`, or "" for the whole store). The store keeps a counter per prefix, changed in the
 * transaction of every write that opens or ends a run, after the write's own rows, so two writes near
 * the bound cannot both pass (ADRs 0123, 0127). A run takes a place under the prefix of the limit it was
 * started (or reopened) with, and gives it back when it ends or is deleted; a run started without a
 * limit takes none.
 */
export interface OpenLimit {
  /** The threads counted together: those whose id starts with it (a tenant's `<tenant>/`). */
  readonly prefix: string;
  /** The most of them running or paused at once; a new run past it is refused `too_many_open_runs`. */
  readonly max: number;
}

/** The statuses that hold a place under an `OpenLimit`. */
export const openStatuses: readonly RunStatus[] = ["running", "paused"];

/** A run's place under an `OpenLimit`: the prefix it is counted under, or null when it takes none. */
export function countedPrefix(limit: OpenLimit | undefined, threadId: string): string | null {
  return limit !== undefined && threadId.startsWith(limit.prefix) ? limit.prefix : null;
}

/** One prefix's open-runs counter beside a recount of the open runs it counts (`recountOpenRuns`). */
export interface OpenRunsCount {
  /** The prefix the runs were counted under (an `OpenLimit`'s). */
  readonly prefix: string;
  /** The counter the store keeps and checks each start against. */
  readonly counter: number;
  /** The open runs stored as counted under the prefix, counted one by one now. */
  readonly recounted: number;
}

/** The refusal of a write past its `OpenLimit`; nothing of the write is stored. */
export function tooManyOpenRuns(limit: OpenLimit): DurableError {
  return new DurableError(
    "too_many_open_runs",
    `This caller has ${limit.max} runs running or paused already (maxOpenRuns); answer, cancel or let expire a paused run before starting another`,
    { data: { max: limit.max } },
  );
}

/** The `run_active` refusal of a claim whose lease has not run out. */
export function leaseHeld(threadId: string, silentForMs: number, leaseMs: number): DurableError {
  const silent = Math.max(0, Math.round(silentForMs));
  return new DurableError(
    "run_active",
    `Thread "${threadId}" wrote ${silent} ms ago; another runner may be driving it (lease ${leaseMs} ms)`,
    { retryable: true, data: { retryAfterMs: Math.max(1, Math.ceil(leaseMs - silentForMs)) } },
  );
}

/** Which stale runs to look for (`findStaleRuns`). */
export interface StaleRunQuery {
  /** Runs whose last write is at least this old, by the store's clock (the database's on PostgreSQL). */
  readonly staleAfterMs: number;
  /** Only runs of these graphs (the ones the asking runner can drive). */
  readonly graphs: readonly string[];
  /** At most this many, longest silent first. */
  readonly limit: number;
}

/** Which paused runs' approval expiries to read (`findExpiringRuns`): one page, soonest first. */
export interface ExpiringRunQuery {
  /** Expiries at or before this (ms since the epoch). */
  readonly dueBy: number;
  /** Only runs of these graphs (the ones the asking runner can resume). */
  readonly graphs: readonly string[];
  /** The page starts after this expiry (the previous page's last): in (expiresAt, threadId) order. */
  readonly after?: ExpiringRun;
  /** At most this many. */
  readonly limit: number;
}

/** A paused run and when its soonest open approval expires (ms since the epoch). */
export interface ExpiringRun {
  /** The paused run's thread. */
  readonly threadId: string;
  /** When its soonest open approval expires, ms since the epoch. */
  readonly expiresAt: number;
}

export interface DurableStore {
  /**
   * Creates a thread with its first run and batch; throws `thread_exists` when the thread is taken, and
   * `too_many_open_runs` (nothing written) when `options.openLimit` would be passed.
   */
  createRun(
    record: RunRecord,
    batch?: CommitBatch,
    options?: { readonly openLimit?: OpenLimit },
  ): Promise<void>;
  getRun(threadId: string): Promise<RunRecord | undefined>;
  /**
   * Hands the run to a new owner when its status is one of `fromStatus`, applying `batch`; returns the
   * run as claimed and its last frame seq, or undefined when the status did not match.
   */
  claimRun(
    threadId: string,
    owner: string,
    fromStatus: readonly RunStatus[],
    batch?: CommitBatch,
    options?: ClaimOptions,
  ): Promise<{ run: RunRecord; lastSeq: number } | undefined>;
  /** Writes a batch if `owner` still holds the run; else throws `run_fenced` and writes nothing. */
  commit(threadId: string, owner: string, batch: CommitBatch): Promise<void>;
  readJournal(threadId: string): Promise<JournalRecord[]>;
  /** Frames with seq > afterSeq, oldest first, at most `limit`; only of `types` when given. */
  readFrames(threadId: string, afterSeq: number, limit?: number, types?: readonly string[]): Promise<Frame[]>;
  /**
   * A thread is one row (its latest run), one journal and one frame log shared by its runs. Threads in
   * id order; each record is the thread's latest run.
   */
  listThreads(query?: ThreadQuery): Promise<RunRecord[]>;
  /**
   * Thread ids of `running` runs that have written nothing for `staleAfterMs` by the store's clock: no
   * live driver vouches for them (a driver's heartbeat writes every third of its lease). A hint only;
   * the claim (`claimRun` with `staleAfterMs`) decides, under the row lock.
   */
  findStaleRuns(query: StaleRunQuery): Promise<string[]>;
  /**
   * Paused runs whose soonest approval expires by `dueBy`, in (expiresAt, threadId) order, a page at a
   * time: what a runner loads so an expiry is resumed at its time though the runner that paused the run
   * is gone (ADR 0124). A hint only; the resume's claim decides.
   */
  findExpiringRuns(query: ExpiringRunQuery): Promise<ExpiringRun[]>;
  /** Deletes the thread with its journal and frames; false when there was none. */
  deleteThread(threadId: string): Promise<boolean>;
  /** Deletes threads in one of `statuses` whose last write is before `updatedBefore`; their ids. */
  pruneThreads(
    query: ThreadQuery & { readonly updatedBefore: string; readonly statuses: readonly RunStatus[] },
  ): Promise<string[]>;
  /**
   * Every prefix's open-runs counter beside a recount of the open runs stored under it, read at one
   * moment: a check that the counters have not drifted (they differ only if the store is broken). It
   * reads every open run, so it is for tests and audits, not for each request.
   */
  recountOpenRuns(): Promise<OpenRunsCount[]>;
  close(): Promise<void>;
}
