/** Runs jobs one at a time in this process; jobs left unfinished by a stopped process resume at start. */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "@tackle/core";
import { isTransientDatabaseError } from "@tackle/storage";
import type { MemoryJob } from "../schemas/admin.ts";
import type { MemoryScope } from "../scope/memory-scope.ts";
import type { JobLeases, MemoryStore, StoredJob } from "../store/memory-store.ts";

type JobType = MemoryJob["type"];

export interface JobRunnerOptions {
  readonly store: MemoryStore;
  readonly logger: Logger;
  readonly now: () => string;
  /** Each handler is idempotent: a job resumed after a crash may run twice. */
  readonly handlers: Record<JobType, (job: StoredJob) => Promise<unknown>>;
  /** Told of each job stored (retention counts them per tenant and per user). */
  readonly recorded?: (tenantId: string, userId: string | undefined) => void;
}

export function createJobRunner(options: JobRunnerOptions) {
  const { store, logger } = options;
  if (store.jobLeases !== undefined) return createLeasedJobRunner(options, store.jobLeases);
  const queue: StoredJob[] = [];
  let running: Promise<void> | undefined;
  let closed = false;
  let resuming: Promise<void> | undefined;

  // A job found running at start was left by a process that stopped before this one started.
  const processStartedAt = options.now();
  const stopping = new AbortController();

  async function runOne(job: StoredJob): Promise<void> {
    const started: StoredJob = { ...job, status: "running", startedAt: options.now() };
    if (!(await store.claimJob(job.tenantId, job.id, started.startedAt!, processStartedAt))) {
      logger.debug("memory job claimed by another process", { jobId: job.id });
      return;
    }
    let finished: StoredJob;
    try {
      const result = await retried(options, started, stopping.signal, () =>
        options.handlers[job.type](started),
      );
      finished = { ...started, status: "succeeded", result, finishedAt: options.now() };
    } catch (error) {
      // Closed mid-retry: the job stays running and resumes at the next start.
      if (stopping.signal.aborted || purgedWhileRunning(options, started, error)) return;
      finished = failedJob(options, started, error);
    }
    // The outcome's write is retried too: unwritten, the job would show running until the next start.
    await retried(options, started, stopping.signal, () => store.updateJob(finished)).catch((error) => {
      if (!stopping.signal.aborted) throw error;
    });
  }

  function drain(): void {
    if (running || closed) return;
    running = (async () => {
      while (queue.length > 0 && !closed) await runOne(queue.shift()!);
    })()
      .catch((error) => logger.error("memory job runner stopped", { error: (error as Error).message }))
      .finally(() => {
        running = undefined;
        if (queue.length > 0 && !closed) drain();
      });
  }

  return {
    async enqueue(tenantId: string, type: JobType, scope: MemoryScope, input: unknown): Promise<MemoryJob> {
      const job: StoredJob = {
        id: randomUUID(),
        tenantId,
        type,
        status: "queued",
        ...scope,
        input,
        createdAt: options.now(),
      };
      await store.insertJob(job);
      options.recorded?.(tenantId, job.userId);
      // Run once the job is committed: queued by a write under an idempotency key, it is in that
      // write's transaction until then, and gone if it rolls back.
      store.afterCommit(() => {
        queue.push(job);
        drain();
      });
      return publicJob(job);
    },

    /** Records a job that already ran inline (a novelty scan) so it is listed with the others. */
    record: (tenantId: string, type: JobType, scope: MemoryScope, input: unknown, result: unknown) =>
      recordJob(options, tenantId, type, scope, input, result),

    resume(): void {
      resuming = store
        .unfinishedJobs()
        .then((jobs) => {
          if (jobs.length > 0) logger.info("resuming memory jobs", { count: jobs.length });
          queue.push(...jobs);
          drain();
        })
        .catch((error) => logger.error("could not resume memory jobs", { error: (error as Error).message }));
    },

    async close(): Promise<void> {
      await resuming;
      closed = true;
      stopping.abort();
      await running;
    },
  };
}

/**
 * Jobs on a store several processes share: every process polls for the next claimable job (queued, or
 * running with a lapsed lease), holds it by renewing its lease, and writes its outcome only while it
 * still holds it. A process killed mid-job stops renewing; another finishes the job after the lease.
 */
function createLeasedJobRunner(options: JobRunnerOptions, leases: JobLeases) {
  const { store, logger } = options;
  // Which process holds a job, readable in `lease_owner` by an operator (and by the soak, which kills
  // a service while it holds one): host and process id, then a random part unique to this runner.
  const owner = `${hostname()}:${process.pid}:${randomUUID()}`;
  const pollMs = Math.min(500, Math.max(20, Math.floor(leases.leaseMs / 4)));
  let closed = false;
  let busy: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  const stopping = new AbortController();

  /** Claims and runs jobs until none is claimable. */
  function poll(): void {
    if (busy || closed) return;
    busy = (async () => {
      while (!closed) {
        const job = await leases.claimNext(owner, options.now());
        if (job === undefined) return;
        await runClaimed(options, leases, owner, job, stopping.signal);
      }
    })()
      .catch((error) => logger.error("memory job poll failed", { error: (error as Error).message }))
      .finally(() => {
        busy = undefined;
      });
  }

  return {
    async enqueue(tenantId: string, type: JobType, scope: MemoryScope, input: unknown): Promise<MemoryJob> {
      const job: StoredJob = {
        id: randomUUID(),
        tenantId,
        type,
        status: "queued",
        ...scope,
        input,
        createdAt: options.now(),
      };
      await store.insertJob(job);
      options.recorded?.(tenantId, job.userId);
      store.afterCommit(poll);
      return publicJob(job);
    },

    record: (tenantId: string, type: JobType, scope: MemoryScope, input: unknown, result: unknown) =>
      recordJob(options, tenantId, type, scope, input, result),

    /** Starts polling: queued jobs and jobs whose process stopped are picked up here. */
    resume(): void {
      if (timer !== undefined) return;
      timer = setInterval(poll, pollMs);
      timer.unref();
      poll();
    },

    async close(): Promise<void> {
      closed = true;
      clearInterval(timer);
      stopping.abort();
      await busy;
    },
  };
}
/** Runs a claimed job while renewing its lease; its outcome is written only if the lease still holds. */
async function runClaimed(
  options: JobRunnerOptions,
  leases: JobLeases,
  owner: string,
  job: StoredJob,
  stopping: AbortSignal,
): Promise<void> {
  const { logger } = options;
  let held = true;
  // Retries stop when the lease is lost (another process finishes the job) or the runner closes.
  const lost = new AbortController();
  const stop = AbortSignal.any([stopping, lost.signal]);
  const renewal = setInterval(
    () => {
      leases
        .renew(job, owner)
        .then((kept) => {
          if (!kept && held) {
            held = false;
            lost.abort();
            logger.warn("memory job lease lost; another process may finish it", { jobId: job.id });
          }
        })
        .catch((error) =>
          logger.warn("memory job lease renewal failed", {
            jobId: job.id,
            error: (error as Error).message,
          }),
        );
    },
    Math.max(10, Math.floor(leases.leaseMs / 3)),
  );
  try {
    let finished: StoredJob;
    try {
      const result = await retried(options, job, stop, () => options.handlers[job.type](job));
      finished = { ...job, status: "succeeded", result, finishedAt: options.now() };
    } catch (error) {
      // Closed or lost mid-retry: the lease lapses and a process takes the job up again.
      if (stop.aborted || purgedWhileRunning(options, job, error)) return;
      finished = failedJob(options, job, error);
    }
    if (!(await finishOrFail(options, leases, owner, job, finished))) {
      logger.warn("memory job finished after its lease was taken; its outcome was not written", {
        jobId: job.id,
      });
    }
  } finally {
    held = false;
    clearInterval(renewal);
  }
}

/**
 * Writes a job's outcome. A success the store refuses for good (not a transient error: a result it
 * cannot hold) is written as the job's failure instead: left running under this process's lease, the
 * job would be claimed again at the next poll and its handler run again, for ever (ADR 0570).
 */
async function finishOrFail(
  options: JobRunnerOptions,
  leases: JobLeases,
  owner: string,
  job: StoredJob,
  finished: StoredJob,
): Promise<boolean> {
  try {
    return await leases.finish(finished, owner);
  } catch (error) {
    if (finished.status !== "succeeded" || isTransientDatabaseError(error)) throw error;
    return leases.finish(failedJob(options, job, error), owner);
  }
}

/**
 * Waits before each retry of a job whose handler failed on a transient database error (a restart or
 * failover of PostgreSQL, SQLite busy): 0.25 s doubling to 16 s, about a minute in all, after which
 * the job fails with the last error. Handlers are idempotent, so a retry never stores a turn twice.
 */
const retryDelaysMs = [250, 500, 1_000, 2_000, 4_000, 8_000, 16_000, 16_000, 16_000];

/** Runs a job's work (its handler, its outcome's write), again after each transient database error while `stop` has not fired. */
async function retried<T>(
  options: JobRunnerOptions,
  job: StoredJob,
  stop: AbortSignal,
  work: () => Promise<T>,
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      const delayMs = retryDelaysMs[attempt];
      if (!isTransientDatabaseError(error) || delayMs === undefined || stop.aborted) throw error;
      options.logger.warn("memory job hit a transient database error; retrying", {
        jobId: job.id,
        attempt: attempt + 1,
        delayMs,
        error: (error as Error).message,
      });
      // An abort (close, lease lost) ends the wait by throwing, and the caller leaves the job as it is.
      await sleep(delayMs, undefined, { signal: stop });
    }
  }
}

/**
 * Whether the job stopped because a purge of its scope deleted it (ADR 0561): its write found its row
 * gone and stored nothing. There is no outcome to write; a client asking for the job is told 404.
 */
function purgedWhileRunning(options: JobRunnerOptions, job: StoredJob, error: unknown): boolean {
  const failure = error as { code?: unknown; data?: { resource?: unknown; id?: unknown } };
  const gone =
    failure?.code === "not_found" && failure.data?.resource === "job" && failure.data.id === job.id;
  if (gone)
    options.logger.info("memory job stopped: its scope was purged", { jobId: job.id, type: job.type });
  return gone;
}

/** A job's failed outcome: the error's code (or `job_failed`) and message; logged as it is made. */
function failedJob(options: JobRunnerOptions, job: StoredJob, error: unknown): StoredJob {
  const failure = error as { code?: string; message?: string; jobResult?: unknown };
  options.logger.error("memory job failed", { jobId: job.id, type: job.type, error: failure?.message });
  return {
    ...job,
    status: "failed",
    error: {
      code: typeof failure?.code === "string" ? failure.code : "job_failed",
      message: String(failure?.message ?? error),
    },
    // What the job stored before it failed, when it says (an import stopped by a quota).
    ...(failure?.jobResult === undefined ? {} : { result: failure.jobResult }),
    finishedAt: options.now(),
  };
}

async function recordJob(
  options: JobRunnerOptions,
  tenantId: string,
  type: JobType,
  scope: MemoryScope,
  input: unknown,
  result: unknown,
): Promise<MemoryJob> {
  const at = options.now();
  const job: StoredJob = {
    id: randomUUID(),
    tenantId,
    type,
    status: "succeeded",
    ...scope,
    input,
    result,
    createdAt: at,
    startedAt: at,
    finishedAt: at,
  };
  await options.store.insertJob(job);
  options.recorded?.(tenantId, job.userId);
  return publicJob(job);
}

function publicJob(job: StoredJob): MemoryJob {
  const { tenantId: _tenant, ...rest } = job;
  return rest;
}

export type JobRunner = ReturnType<typeof createJobRunner>;
