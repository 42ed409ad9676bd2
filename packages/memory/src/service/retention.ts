/**
 * Retention (ADR 0537): what searches and jobs leave behind is bounded whatever a caller's rate. A
 * tenant's traces and finished jobs are cut to its newest every so many it adds, and a sweep at most
 * an hour apart deletes, of every tenant, traces and finished jobs past their age and access counts
 * past theirs; each in batches after the write that set it off, never inside a search's answer.
 */
import type { Logger } from "@tackle/core";
import type { MemoryStore } from "../store/memory-store.ts";
import { batchRows, createDeletionQueue } from "./deletion-queue.ts";

export interface MemoryRetentionOptions {
  /** Retrieval traces kept per tenant, the newest (default 10,000); `getTrace` of a deleted one answers `not_found`. */
  readonly maxTracesPerTenant?: number;
  /** Days a retrieval trace is kept (default 30). */
  readonly traceRetentionDays?: number;
  /**
   * Days of access counts kept, today included (default 365: `accessTrends`' longest window);
   * `accessTrends` and the `searches` total of `accessSummaries` count within them.
   */
  readonly accessRetentionDays?: number;
  /**
   * Finished jobs kept per tenant, the newest (default 1,000). An import job that stored events is
   * never deleted: a memory's `chainTrace` names it; it goes with its scope's purge.
   */
  readonly maxFinishedJobsPerTenant?: number;
  /** Days a finished job is kept after it finished (default 30), imports that stored events aside. */
  readonly jobRetentionDays?: number;
}

export interface Retention {
  /** A trace was stored for the tenant. */
  traceRecorded(tenantId: string): void;
  /** A job was stored for the tenant. */
  jobRecorded(tenantId: string): void;
  /** Stops the timer and waits for the deletions under way (each ends at its next batch). */
  close(): Promise<void>;
}

const dayMs = 86_400_000;
/** The sweep of expired records runs at most this often (by the service's clock). */
const sweepEveryMs = 60 * 60 * 1000;
/** Tenants whose inserts are counted in process; past it the counts start again (a prune comes later). */
const maxCountedTenants = 10_000;

export function createRetention(
  store: MemoryStore,
  options: MemoryRetentionOptions,
  clock: () => Date,
  logger: Logger,
): Retention {
  const limits = {
    maxTraces: whole(options.maxTracesPerTenant, 10_000, "maxTracesPerTenant"),
    traceDays: whole(options.traceRetentionDays, 30, "traceRetentionDays"),
    accessDays: whole(options.accessRetentionDays, 365, "accessRetentionDays"),
    maxJobs: whole(options.maxFinishedJobsPerTenant, 1_000, "maxFinishedJobsPerTenant"),
    jobDays: whole(options.jobRetentionDays, 30, "jobRetentionDays"),
  };
  // A tenant holds at most a tenth more than its limit (and never more than 100 more) between cuts.
  const every = (keep: number) => Math.max(1, Math.min(100, Math.ceil(keep / 10)));
  const counted = { traces: new Map<string, number>(), jobs: new Map<string, number>() };
  const deletions = createDeletionQueue(store, logger);
  let lastSweep = Number.NEGATIVE_INFINITY;
  // Sweeps a service that nobody calls too; a minute's tick, checked against the service's clock.
  const timer = setInterval(() => sweepIfDue(), 60_000);
  timer.unref();

  function recorded(kind: "traces" | "jobs", tenantId: string): void {
    sweepIfDue();
    const counts = counted[kind];
    const keep = kind === "traces" ? limits.maxTraces : limits.maxJobs;
    const count = (counts.get(tenantId) ?? 0) + 1;
    if (count < every(keep)) {
      if (counts.size >= maxCountedTenants && !counts.has(tenantId)) counts.clear();
      counts.set(tenantId, count);
      return;
    }
    counts.set(tenantId, 0);
    const prune = kind === "traces" ? store.pruneTraces : store.pruneJobs;
    deletions.later(`${kind} past the newest ${keep} of a tenant`, `${kind}\u0000${tenantId}`, () =>
      deletions.drain(() => prune.call(store, tenantId, keep, batchRows)),
    );
  }

  function sweepIfDue(): void {
    const now = clock().getTime();
    if (deletions.closing || now - lastSweep < sweepEveryMs) return;
    lastSweep = now;
    const cutoffs = {
      tracesBefore: new Date(now - limits.traceDays * dayMs).toISOString(),
      jobsFinishedBefore: new Date(now - limits.jobDays * dayMs).toISOString(),
      accessBeforeDay: new Date(now - (limits.accessDays - 1) * dayMs).toISOString().slice(0, 10),
    };
    deletions.later("expired traces, jobs and access counts", "expired", async () => {
      let total = 0;
      await deletions.drain(async () => {
        const deleted = await store.expireRecords(cutoffs, batchRows);
        total += deleted.traces + deleted.jobs + deleted.accessRecords;
        return Math.max(deleted.traces, deleted.jobs, deleted.accessRecords);
      });
      return total;
    });
  }

  return {
    traceRecorded: (tenantId) => recorded("traces", tenantId),
    jobRecorded: (tenantId) => recorded("jobs", tenantId),
    async close() {
      clearInterval(timer);
      await deletions.close();
    },
  };
}

function whole(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`retention.${name} must be a whole number of at least 1, not ${value}`);
  }
  return value;
}
