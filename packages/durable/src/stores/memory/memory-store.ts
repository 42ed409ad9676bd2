/** An in-memory store: for tests and demos; gone when the process ends. */
import { DurableError } from "../../errors/durable-error.ts";
import type {
  CommitBatch,
  DurableStore,
  Frame,
  JournalRecord,
  RunRecord,
  RunStatus,
} from "../../store/durable-store.ts";
import {
  countedPrefix,
  leaseHeld,
  type OpenLimit,
  type OpenRunsCount,
  openStatuses,
  tooManyOpenRuns,
} from "../../store/durable-store.ts";
import { runFenced, threadExists, unknownRun } from "../run-row.ts";

interface Thread {
  run: RunRecord;
  /** The run's soonest approval expiry, as the last patch wrote it (kept out of the record). */
  expiresAt: number | null;
  /** The prefix whose open-runs counter holds the run while it is open, or null (ADR 0127). */
  openPrefix: string | null;
  journal: Map<string, JournalRecord>;
  frames: Frame[];
}

/** Applies a batch to a thread: its journal records, its frames (in seq order) and its run's patch. */
function apply(thread: Thread, batch: CommitBatch): void {
  for (const frame of batch.frames ?? []) {
    const last = thread.frames.at(-1);
    if (last !== undefined && frame.seq <= last.seq) {
      throw new DurableError("run_fenced", `Frame seq ${frame.seq} is not after ${last.seq}`);
    }
  }
  for (const record of batch.journal ?? []) thread.journal.set(record.key, structuredClone(record));
  thread.frames.push(...(batch.frames ?? []).map((frame) => structuredClone(frame)));
  const { expiresAt, ...patch } = batch.run ?? {};
  if (expiresAt !== undefined) thread.expiresAt = expiresAt;
  thread.run = { ...thread.run, ...patch, updatedAt: new Date().toISOString() };
}

/** Open runs per prefix, kept with every status change (ADR 0127). */
function createOpenCounts() {
  const openCounts = new Map<string, number>();
  return {
    counts: openCounts as ReadonlyMap<string, number>,
    /** Whether one more open run under `prefix` would pass the limit. */
    overLimit(limit: OpenLimit | undefined, prefix: string | null): boolean {
      return limit !== undefined && prefix !== null && (openCounts.get(prefix) ?? 0) + 1 > limit.max;
    },
    /**
     * Moves the thread's place as its status moved from `wasOpen`: an ended run gives back the place it
     * held, a reopened one takes one under `reopenAs` (checked against the limit before anything changed).
     */
    settle(thread: Thread, wasOpen: boolean, reopenAs: string | null): void {
      const nowOpen = openStatuses.includes(thread.run.status);
      if (wasOpen && !nowOpen && thread.openPrefix !== null) {
        openCounts.set(thread.openPrefix, (openCounts.get(thread.openPrefix) ?? 0) - 1);
        thread.openPrefix = null;
      } else if (!wasOpen && nowOpen && reopenAs !== null) {
        openCounts.set(reopenAs, (openCounts.get(reopenAs) ?? 0) + 1);
        thread.openPrefix = reopenAs;
      }
    },
  };
}

export function createMemoryStore(): DurableStore {
  const threads = new Map<string, Thread>();
  const open = createOpenCounts();
  const settleOpen = open.settle;
  const overLimit = open.overLimit;

  function need(threadId: string): Thread {
    const thread = threads.get(threadId);
    if (thread === undefined) throw unknownRun(threadId);
    return thread;
  }

  /** A deleted thread gives back its place. */
  function forget(threadId: string): boolean {
    const thread = threads.get(threadId);
    if (thread === undefined) return false;
    settleOpen({ ...thread, run: { ...thread.run, status: "cancelled" } }, true, null);
    threads.delete(threadId);
    return true;
  }

  return {
    async createRun(record, batch = {}, options = {}) {
      if (threads.has(record.threadId)) {
        throw threadExists(record.threadId);
      }
      const prefix = countedPrefix(options.openLimit, record.threadId);
      const opens = openStatuses.includes(batch.run?.status ?? record.status);
      if (opens && overLimit(options.openLimit, prefix))
        throw tooManyOpenRuns(options.openLimit as OpenLimit);
      const thread: Thread = {
        run: { ...record },
        expiresAt: null,
        openPrefix: null,
        journal: new Map(),
        frames: [],
      };
      apply(thread, batch);
      threads.set(record.threadId, thread);
      settleOpen(thread, false, prefix);
    },
    async getRun(threadId) {
      const thread = threads.get(threadId);
      return thread === undefined ? undefined : { ...thread.run };
    },
    async claimRun(threadId, owner, fromStatus: readonly RunStatus[], batch = {}, options = {}) {
      const thread = need(threadId);
      if (!fromStatus.includes(thread.run.status)) return undefined;
      if (options.ifOwner !== undefined && thread.run.owner !== options.ifOwner) return undefined;
      // One process: its own clock is the store's clock.
      const silentForMs = Date.now() - Date.parse(thread.run.updatedAt);
      const lease = options.staleAfterMs ?? 0;
      if (lease > 0 && silentForMs < lease) throw leaseHeld(threadId, silentForMs, lease);
      const wasOpen = openStatuses.includes(thread.run.status);
      const prefix = countedPrefix(options.openLimit, threadId);
      const opens = openStatuses.includes(batch.run?.status ?? thread.run.status);
      // A claim that opens an ended thread's next run takes a place; a resume or takeover keeps its own.
      if (!wasOpen && opens && overLimit(options.openLimit, prefix)) {
        throw tooManyOpenRuns(options.openLimit as OpenLimit);
      }
      apply(thread, { ...batch, run: { ...batch.run, owner } });
      settleOpen(thread, wasOpen, prefix);
      return { run: { ...thread.run }, lastSeq: thread.frames.at(-1)?.seq ?? 0 };
    },
    async commit(threadId, owner, batch) {
      const thread = need(threadId);
      if (thread.run.owner !== owner) {
        throw runFenced(threadId);
      }
      const wasOpen = openStatuses.includes(thread.run.status);
      apply(thread, batch);
      settleOpen(thread, wasOpen, null);
    },
    async readJournal(threadId) {
      return [...(threads.get(threadId)?.journal.values() ?? [])].map((record) => ({ ...record }));
    },
    async readFrames(threadId, afterSeq, limit = 1000, types) {
      const frames = threads.get(threadId)?.frames ?? [];
      return frames
        .filter((frame) => frame.seq > afterSeq && (types === undefined || types.includes(frame.type)))
        .slice(0, limit);
    },
    async listThreads(query = {}) {
      return listed(threads, query);
    },
    async findStaleRuns(query) {
      return staleRuns(threads, query);
    },
    async findExpiringRuns(query) {
      return expiringRuns(threads, query);
    },
    async deleteThread(threadId) {
      return forget(threadId);
    },
    async pruneThreads(query) {
      const pruned: string[] = [];
      for (const [id, thread] of threads) {
        if (!id.startsWith(query.prefix ?? "") || !query.statuses.includes(thread.run.status)) continue;
        if (thread.run.updatedAt >= query.updatedBefore) continue;
        if (query.limit !== undefined && pruned.length >= query.limit) break;
        forget(id);
        pruned.push(id);
      }
      return pruned;
    },
    async recountOpenRuns() {
      return recount(threads, open.counts);
    },
    async close() {},
  };
}

/** The threads under `query.prefix` after `query.after`, in id order. */
function listed(
  threads: ReadonlyMap<string, Thread>,
  query: Parameters<DurableStore["listThreads"]>[0] = {},
): RunRecord[] {
  return [...threads.keys()]
    .filter((id) => id.startsWith(query.prefix ?? "") && (query.after === undefined || id > query.after))
    .sort()
    .slice(0, query.limit ?? 100)
    .map((id) => ({ ...(threads.get(id) as Thread).run }));
}

/** The running runs of `query.graphs` silent for `query.staleAfterMs`, oldest first. */
function staleRuns(
  threads: ReadonlyMap<string, Thread>,
  query: Parameters<DurableStore["findStaleRuns"]>[0],
): string[] {
  const before = new Date(Date.now() - query.staleAfterMs).toISOString();
  return [...threads.values()]
    .filter(
      ({ run }) => run.status === "running" && query.graphs.includes(run.graph) && run.updatedAt <= before,
    )
    .sort((a, b) => (a.run.updatedAt < b.run.updatedAt ? -1 : 1))
    .slice(0, query.limit)
    .map(({ run }) => run.threadId);
}

/** The paused runs of `query.graphs` due by `query.dueBy`, after `query.after`, soonest first. */
function expiringRuns(
  threads: ReadonlyMap<string, Thread>,
  query: Parameters<DurableStore["findExpiringRuns"]>[0],
): { threadId: string; expiresAt: number }[] {
  const after = query.after ?? { expiresAt: Number.MIN_SAFE_INTEGER, threadId: "" };
  const found: { threadId: string; expiresAt: number }[] = [];
  for (const [threadId, { run, expiresAt }] of threads) {
    if (run.status !== "paused" || expiresAt === null || expiresAt > query.dueBy) continue;
    if (!query.graphs.includes(run.graph)) continue;
    if (expiresAt < after.expiresAt || (expiresAt === after.expiresAt && threadId <= after.threadId))
      continue;
    found.push({ threadId, expiresAt });
  }
  found.sort((a, b) => a.expiresAt - b.expiresAt || (a.threadId < b.threadId ? -1 : 1));
  return found.slice(0, query.limit);
}

/** Every prefix's counter beside the open runs stored under it, counted again. */
function recount(
  threads: ReadonlyMap<string, Thread>,
  openCounts: ReadonlyMap<string, number>,
): OpenRunsCount[] {
  const recounted = new Map<string, number>();
  for (const { run, openPrefix } of threads.values()) {
    if (openPrefix !== null && openStatuses.includes(run.status))
      recounted.set(openPrefix, (recounted.get(openPrefix) ?? 0) + 1);
  }
  return [...new Set([...openCounts.keys(), ...recounted.keys()])].sort().map((prefix) => ({
    prefix,
    counter: openCounts.get(prefix) ?? 0,
    recounted: recounted.get(prefix) ?? 0,
  }));
}
