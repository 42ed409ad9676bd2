/**
 * The purge property's jobs (ADRs 0561, 0564): an import, a consolidation and a novelty scan, each
 * waited for until it finished or a purge deleted it, and the claims on every job the program made:
 * one a purge covered is gone, any other reads back as it finished. And a service whose store runs a
 * hook inside a job's listing, for purge-running-consolidation.test.ts.
 */
import assert from "node:assert/strict";
import { silentLogger } from "@tackle/core";
import { createMemoryService, MemoryError, type MemoryService, type MemoryStore } from "@tackle/memory";
import { jobEndOf } from "./job-end.ts";
import { covers, type Mark, type Program, type Scope } from "./purge-program.ts";

/** A job the program made, and how it finished. */
export interface TrackedJob {
  readonly id: string;
  readonly type: "import" | "consolidate" | "novelty_scan";
  readonly scope: Scope;
  status: string;
}

/**
 * What a job the program waited for must have come to: succeeded, or purged when a purge raced it.
 * A job no purge covered is never purged and never fails (a memory purged under a consolidation is
 * skipped, not a failure).
 */
function expectEnd(job: TrackedJob, end: { status: string; error?: unknown }, racing: boolean) {
  const told = `${job.type} ${job.id} of ${JSON.stringify(job.scope)}`;
  if (end.status === "purged") assert.ok(racing, `${told}: purged with no purge covering it`);
  else assert.equal(end.status, "succeeded", `${told}: ${end.status} ${JSON.stringify(end.error)}`);
}

/**
 * An import job of a few turns sharing one marker, run by the service's worker and waited for until
 * it finished or a purge deleted it (ADR 0561): its turns read back all or none.
 */
export async function importJob(program: Program, scope: Scope, racing: boolean) {
  const { random, service, store, tenant } = program;
  const marker = program.marker();
  const turns = 2 + Math.floor(random() * 4);
  const infer = random() < 0.5;
  const marks: Mark[] = [];
  await program.attempt(
    "import",
    marks,
    async () => {
      const { job } = await service.importConversations(tenant, {
        ...scope,
        format: "openai",
        infer,
        conversations: [
          {
            messages: Array.from({ length: turns }, (_, index) => ({
              role: index % 2 === 0 ? "user" : "assistant",
              content: index % 2 === 0 ? `I prefer ${program.text(marker)}` : program.text(marker),
            })),
          },
        ],
      });
      marks.push(
        program.mark(marker, scope, "import", racing, async () => {
          const events = await store.listEvents(tenant, scope, { order: "asc", limit: 1_000 });
          const stored = events.filter((event) => event.content.includes(marker)).length;
          assert.ok(stored === 0 || stored === turns, `import ${marker}: ${stored} of ${turns} turns`);
          return stored === turns;
        }),
      );
      await track(program, { id: job.id, type: "import", scope, status: job.status }, racing);
    },
    racing,
  );
}

/**
 * A consolidation of the scope (ADR 0564): merges near-duplicates (a low threshold, so the program's
 * texts meet it), and half the time decays every memory it reads as stale. It writes no text of its
 * own; racing a purge it ends purged or succeeded, whatever memories were purged under it.
 */
export async function consolidation(program: Program, scope: Scope, racing: boolean) {
  const stale = program.random() < 0.5;
  await program.attempt(
    "consolidation",
    [],
    async () => {
      const { job } = await program.service.consolidate(program.tenant, {
        ...scope,
        similarityThreshold: 0.5,
        staleAfterDays: stale ? 0 : 3650,
      });
      if (racing) program.count("consolidation raced");
      await track(program, { id: job.id, type: "consolidate", scope, status: job.status }, racing);
    },
    racing,
  );
}

/**
 * A novelty scan (recorded as a finished job) of a candidate carrying a marker of its own: its record
 * is a record of its scope, read back by its marker; it names the nearest memory, whose own marker
 * must not outlive that memory's purge in the scan's record (ADR 0564).
 */
export async function noveltyScan(program: Program, scope: Scope, racing: boolean) {
  const marker = program.marker();
  const marks: Mark[] = [];
  await program.attempt(
    "novelty scan",
    marks,
    async () => {
      const { jobId } = await program.service.noveltyScan(program.tenant, {
        ...scope,
        candidates: [program.text(marker)],
      });
      marks.push(
        program.mark(marker, scope, "novelty scan", racing, async () => {
          const answer = await program.service.getJob(program.tenant, jobId).catch((error: unknown) => {
            if (MemoryError.isInstance(error) && error.code === "not_found") return undefined;
            throw error;
          });
          return answer !== undefined && JSON.stringify(answer.job).includes(marker);
        }),
      );
      await track(program, { id: jobId, type: "novelty_scan", scope, status: "succeeded" }, racing);
    },
    racing,
  );
}

async function track(program: Program, job: TrackedJob, racing: boolean) {
  const end = await jobEndOf(program.service, program.tenant, job.id);
  expectEnd(job, end, racing);
  program.count(`${job.type} ${end.status}`);
  if (end.status === "purged") return;
  job.status = end.status;
  program.jobs.set(job.id, job);
}

/**
 * After a purge of `purged`: every job it covered that existed before it (`before`) is gone; one made
 * while it ran may be gone or kept; every other reads back as it finished (a purge touches no other
 * user's or scope's jobs).
 */
export async function checkJobs(program: Program, purged: Scope, before: ReadonlySet<string>) {
  for (const job of [...program.jobs.values()]) {
    const end = await program.service.getJob(program.tenant, job.id).then(
      (answer) => answer.job.status as string,
      (error: unknown) => {
        if (MemoryError.isInstance(error) && error.code === "not_found") return "purged";
        throw error;
      },
    );
    const told = `${job.type} ${job.id} of ${JSON.stringify(job.scope)} after a purge of ${JSON.stringify(purged)}`;
    if (covers(purged, job.scope) && (before.has(job.id) || end === "purged")) {
      assert.equal(end, "purged", `${told}: kept`);
      program.jobs.delete(job.id);
    } else {
      assert.equal(end, job.status, `${told}: changed`);
    }
  }
}

/** The store, running `hook` (once) after the first listing of `userId`'s memories answers. */
function hookedStore(store: MemoryStore, userId: string, hook: () => Promise<unknown>): MemoryStore {
  let fired = false;
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key);
      if (key !== "listMemories" || typeof value !== "function") {
        return typeof value === "function" ? value.bind(target) : value;
      }
      return async (...args: Parameters<MemoryStore["listMemories"]>) => {
        const listed = await target.listMemories(...args);
        if (!fired && args[1].userId === userId) {
          fired = true;
          await hook();
        }
        return listed;
      };
    },
  });
}

/**
 * A service (jobs not resumed) over `store`, where the first listing of `userId`'s memories runs the
 * hook set by `onListing` (none until set) before it answers; `errors` collects what it logs as errors.
 */
export function serviceWithListingHook(
  store: MemoryStore,
  userId: string,
): { service: MemoryService; errors: string[]; onListing: (hook: () => Promise<unknown>) => void } {
  const errors: string[] = [];
  let hook = async (): Promise<unknown> => undefined;
  const service = createMemoryService({
    store: hookedStore(store, userId, () => hook()),
    resumeJobs: false,
    logger: {
      ...silentLogger,
      error: (message, fields) => errors.push(`${message} ${JSON.stringify(fields)}`),
    },
  });
  return {
    service,
    errors,
    onListing: (next) => {
      hook = next;
    },
  };
}
