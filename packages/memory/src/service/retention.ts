/**
 * Retention (ADRs 0537, 0545): what searches and jobs leave behind is bounded whatever a caller's
 * rate. A user's traces and finished jobs are cut to its newest every so many it adds, so one
 * identity cannot push out another's; a tenant's are cut to its newest likewise, the outer bound
 * however many user ids its callers name. A sweep at most an hour apart deletes, of every tenant,
 * traces and finished jobs past their age and access counts past theirs; each in batches after the
 * write that set it off, never inside a search's answer.
 */
import type { Logger } from "@tackle/core";
import type { MemoryStore } from "../store/memory-store.ts";
import { batchRows, createDeletionQueue } from "./deletion-queue.ts";

export interface MemoryRetentionOptions {
  /** Retrieval traces kept per tenant, the newest (default 10,000); `getTrace` of a deleted one answers `not_found`. */
  readonly maxTracesPerTenant?: number;
  /**
   * Retrieval traces kept per user of a tenant, the newest (default a tenth of `maxTracesPerTenant`,
   * rounded up: 1,000); traces that name no user count as one user. At most `maxTracesPerTenant`.
   */
  readonly maxTracesPerUser?: number;
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
  /**
   * Finished jobs kept per user of a tenant, the newest (default a tenth of
   * `maxFinishedJobsPerTenant`, rounded up: 100), imports that stored events aside; jobs that name no
   * user count as one user. At most `maxFinishedJobsPerTenant`.
   */
  readonly maxFinishedJobsPerUser?: number;
  /** Days a finished job is kept after it finished (default 30), imports that stored events aside. */
  readonly jobRetentionDays?: number;
}

export interface Retention {
  /** A trace was stored for the tenant and the user it names (if any). */
  traceRecorded(tenantId: string, userId: string | undefined): void;
  /** A job was stored for the tenant and the user it names (if any). */
  jobRecorded(tenantId: string, userId: string | undefined): void;
  /** Stops the timer and waits for the deletions under way (each ends at its next batch). */
  close(): Promise<void>;
}

const dayMs = 86_400_000;
/** The sweep of expired records runs at most this often (by the service's clock). */
const sweepEveryMs = 60 * 60 * 1000;
/** Tenants, and users, whose inserts are counted in process; past it the longest quiet one is cut at once. */
const maxCounted = 10_000;
/** A user's default share of its tenant's room: one identity fills at most a tenth of it. */
const userShare = 10;

type Kind = "traces" | "jobs";
/** The cuts due for one tenant's traces or jobs: those of its users (`null`: no user) and its own. */
interface DueCuts {
  readonly users: Set<string | null>;
  tenant: boolean;
}
/** Inserts since the last cut of a tenant (`user` absent) or of one of its users. */
interface Counted {
  readonly kind: Kind;
  readonly tenantId: string;
  readonly user?: string | null;
  readonly count: number;
}

export function createRetention(
  store: MemoryStore,
  options: MemoryRetentionOptions,
  clock: () => Date,
  logger: Logger,
): Retention {
  const limits = resolveLimits(options);
  // A tenant or user holds at most a tenth more than its limit (and never more than 100 more) between cuts.
  const every = (keep: number) => Math.max(1, Math.min(100, Math.ceil(keep / 10)));
  const counted = { tenants: new Map<string, Counted>(), users: new Map<string, Counted>() };
  const due = new Map<string, DueCuts>();
  const deletions = createDeletionQueue(store, logger);
  let lastSweep = Number.NEGATIVE_INFINITY;
  // Sweeps a service that nobody calls too; a minute's tick, checked against the service's clock.
  const timer = setInterval(() => sweepIfDue(), 60_000);
  timer.unref();

  /**
   * Counts one insert; true once a tenth of `keep` came since the last cut. The counts are kept in
   * order of their last insert; past `maxCounted` the longest quiet one is cut at once rather than
   * forgotten, so no churn of other tenants or user ids lets a tenant or user outgrow its limit.
   */
  function reached(counts: Map<string, Counted>, key: string, entry: Omit<Counted, "count">, keep: number) {
    const count = (counts.get(key)?.count ?? 0) + 1;
    counts.delete(key);
    if (count >= every(keep)) return true;
    counts.set(key, { ...entry, count });
    if (counts.size > maxCounted) {
      const [quiet, held] = counts.entries().next().value!;
      counts.delete(quiet);
      cut(held.kind, held.tenantId, held.user);
    }
    return false;
  }

  function recorded(kind: Kind, tenantId: string, userId: string | undefined): void {
    sweepIfDue();
    const keep = limits[kind];
    const user = userId ?? null;
    const userKey = `${kind}\u0000${tenantId}\u0000${user === null ? "" : `=${user}`}`;
    if (reached(counted.users, userKey, { kind, tenantId, user }, keep.user)) cut(kind, tenantId, user);
    if (reached(counted.tenants, `${kind}\u0000${tenantId}`, { kind, tenantId }, keep.tenant)) {
      cut(kind, tenantId, undefined);
    }
  }

  /** Asks for the cut of a user's rows (`null`: those naming none), or of the tenant's (`undefined`). */
  function cut(kind: Kind, tenantId: string, user: string | null | undefined): void {
    const key = `${kind}\u0000${tenantId}`;
    const cuts = due.get(key) ?? { users: new Set(), tenant: false };
    due.set(key, cuts);
    if (user === undefined) cuts.tenant = true;
    else cuts.users.add(user);
    // One task per tenant and kind cuts its users first, then the tenant: the tenant's cut counts only
    // what its users keep, so rows a user holds past its own limit take no room from the others.
    deletions.later(`${kind} past the newest of a user or a tenant`, key, async () => {
      const now = due.get(key);
      due.delete(key);
      if (now === undefined) return 0;
      const keep = limits[kind];
      const prune = (kind === "traces" ? store.pruneTraces : store.pruneJobs).bind(store);
      let deleted = 0;
      for (const each of now.users) {
        deleted += await deletions.drain(() => prune(tenantId, keep.user, batchRows, each));
      }
      if (now.tenant) deleted += await deletions.drain(() => prune(tenantId, keep.tenant, batchRows));
      return deleted;
    });
  }

  function sweepIfDue(): void {
    const now = clock().getTime();
    if (deletions.closing || now - lastSweep < sweepEveryMs) return;
    lastSweep = now;
    const cutoffs = {
      tracesBefore: new Date(now - limits.days.traces * dayMs).toISOString(),
      jobsFinishedBefore: new Date(now - limits.days.jobs * dayMs).toISOString(),
      accessBeforeDay: new Date(now - (limits.days.access - 1) * dayMs).toISOString().slice(0, 10),
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
    traceRecorded: (tenantId, userId) => recorded("traces", tenantId, userId),
    jobRecorded: (tenantId, userId) => recorded("jobs", tenantId, userId),
    async close() {
      clearInterval(timer);
      await deletions.close();
    },
  };
}

/** The options' limits, each a whole number of at least 1; a user's at most its tenant's. */
function resolveLimits(options: MemoryRetentionOptions) {
  const traces = whole(options.maxTracesPerTenant, 10_000, "maxTracesPerTenant");
  const jobs = whole(options.maxFinishedJobsPerTenant, 1_000, "maxFinishedJobsPerTenant");
  return {
    traces: { tenant: traces, user: perUser(options.maxTracesPerUser, traces, "maxTraces") },
    jobs: { tenant: jobs, user: perUser(options.maxFinishedJobsPerUser, jobs, "maxFinishedJobs") },
    days: {
      traces: whole(options.traceRetentionDays, 30, "traceRetentionDays"),
      access: whole(options.accessRetentionDays, 365, "accessRetentionDays"),
      jobs: whole(options.jobRetentionDays, 30, "jobRetentionDays"),
    },
  };
}

function perUser(value: number | undefined, tenant: number, stem: string): number {
  const user = whole(value, Math.ceil(tenant / userShare), `${stem}PerUser`);
  if (user > tenant) {
    throw new RangeError(
      `retention.${stem}PerUser must be at most retention.${stem}PerTenant (${tenant}), not ${user}`,
    );
  }
  return user;
}

function whole(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`retention.${name} must be a whole number of at least 1, not ${value}`);
  }
  return value;
}
