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
import { leaseHeld, type OpenLimit, openStatuses, tooManyOpenRuns } from "../../store/durable-store.ts";
import { runFenced, threadExists, unknownRun } from "../run-row.ts";

interface Thread {
  run: RunRecord;
  /** The run's soonest approval expiry, as the last patch wrote it (kept out of the record). */
  expiresAt: number | null;
  journal: Map<string, JournalRecord>;
  frames: Frame[];
}

export function createMemoryStore(): DurableStore {
  const threads = new Map<string, Thread>();

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

  function need(threadId: string): Thread {
    const thread = threads.get(threadId);
    if (thread === undefined) throw unknownRun(threadId);
    return thread;
  }

  /** Open runs under the limit's prefix, counting no further than one past its bound. */
  function overLimit(limit: OpenLimit | undefined, adding: string): boolean {
    if (limit === undefined || !adding.startsWith(limit.prefix)) return false;
    let open = 1;
    for (const [id, thread] of threads) {
      if (id === adding || !id.startsWith(limit.prefix) || !openStatuses.includes(thread.run.status))
        continue;
      if (++open > limit.max) return true;
    }
    return open > limit.max;
  }

  return {
    async createRun(record, batch = {}, options = {}) {
      if (threads.has(record.threadId)) {
        throw threadExists(record.threadId);
      }
      if (overLimit(options.openLimit, record.threadId))
        throw tooManyOpenRuns(options.openLimit as OpenLimit);
      const thread: Thread = { run: { ...record }, expiresAt: null, journal: new Map(), frames: [] };
      apply(thread, batch);
      threads.set(record.threadId, thread);
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
      if (!openStatuses.includes(thread.run.status) && overLimit(options.openLimit, threadId)) {
        throw tooManyOpenRuns(options.openLimit as OpenLimit);
      }
      apply(thread, { ...batch, run: { ...batch.run, owner } });
      return { run: { ...thread.run }, lastSeq: thread.frames.at(-1)?.seq ?? 0 };
    },
    async commit(threadId, owner, batch) {
      const thread = need(threadId);
      if (thread.run.owner !== owner) {
        throw runFenced(threadId);
      }
      apply(thread, batch);
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
      return [...threads.keys()]
        .filter((id) => id.startsWith(query.prefix ?? "") && (query.after === undefined || id > query.after))
        .sort()
        .slice(0, query.limit ?? 100)
        .map((id) => ({ ...(threads.get(id) as Thread).run }));
    },
    async findStaleRuns(query) {
      const before = new Date(Date.now() - query.staleAfterMs).toISOString();
      return [...threads.values()]
        .filter(
          ({ run }) =>
            run.status === "running" && query.graphs.includes(run.graph) && run.updatedAt <= before,
        )
        .sort((a, b) => (a.run.updatedAt < b.run.updatedAt ? -1 : 1))
        .slice(0, query.limit)
        .map(({ run }) => run.threadId);
    },
    async findExpiringRuns(query) {
      return expiringRuns(threads, query);
    },
    async deleteThread(threadId) {
      return threads.delete(threadId);
    },
    async pruneThreads(query) {
      const pruned: string[] = [];
      for (const [id, thread] of threads) {
        if (!id.startsWith(query.prefix ?? "") || !query.statuses.includes(thread.run.status)) continue;
        if (thread.run.updatedAt >= query.updatedBefore) continue;
        if (query.limit !== undefined && pruned.length >= query.limit) break;
        threads.delete(id);
        pruned.push(id);
      }
      return pruned;
    },
    async close() {},
  };
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
