/**
 * The memory service: retrieval, writes, lifecycle, synthesis and administration, each a group of
 * operations over one shared context (store, clock, embedder).
 */
import { createAdminOperations } from "./admin-operations.ts";
import { withExplicitScope } from "./explicit-scope.ts";
import { createRunOnce } from "./idempotent-writes.ts";
import { createJobRunner } from "./job-runner.ts";
import { runConsolidation } from "./jobs/run-consolidation.ts";
import { runImport } from "./jobs/run-import.ts";
import { createLifecycleOperations } from "./lifecycle-operations.ts";
import type { MemoryService } from "./memory-service.ts";
import { createNoveltyCheck } from "./novelty-check.ts";
import { createPurgeOperations } from "./purge-operations.ts";
import { createRetrievalOperations } from "./retrieval-operations.ts";
import { createSearchRanked } from "./search-ranked.ts";
import { createServiceContext, type MemoryServiceOptions } from "./service-context.ts";
import { createSynthesisOperations } from "./synthesis-operations.ts";
import { createWriteEvents } from "./write-events.ts";
import { createWriteOperations } from "./write-operations.ts";

export type { MemoryServiceOptions } from "./service-context.ts";

export function createMemoryService(options: MemoryServiceOptions): MemoryService {
  const context = createServiceContext(options);
  const { store, logger, clock, nowIso, mutateMemory, retention } = context;
  const novelty = createNoveltyCheck(context);
  const searchRanked = createSearchRanked(context);
  const events = createWriteEvents(context);
  const writes = createWriteOperations(context, novelty, events);
  const jobs = createJobRunner({
    store,
    logger,
    now: nowIso,
    handlers: {
      import: (job) =>
        runImport(job, {
          store,
          now: nowIso,
          writeEvents: events.writeEvents,
        }),
      consolidate: (job) => runConsolidation(job, { store, now: clock, mutateMemory }),
      novelty_scan: async (job) => job.result,
    },
    recorded: retention.jobRecorded,
  });
  const retrieval = createRetrievalOperations(context, searchRanked);
  const lifecycle = createLifecycleOperations(context);
  const synthesis = createSynthesisOperations(context, searchRanked);
  const service: MemoryService = {
    ...retrieval,
    search: withExplicitScope("search", retrieval.search),
    searchKnowledge: withExplicitScope("searchKnowledge", retrieval.searchKnowledge),
    ...writes,
    ...lifecycle,
    listMemories: withExplicitScope("listMemories", lifecycle.listMemories),
    ...synthesis,
    profile: withExplicitScope("profile", synthesis.profile),
    contextBundle: withExplicitScope("contextBundle", synthesis.contextBundle),
    unifiedState: withExplicitScope("unifiedState", synthesis.unifiedState),
    ...createAdminOperations(context, novelty, jobs),
    ...createPurgeOperations(context),
    writeOnce: createRunOnce(store, { ...options.idempotency, clock, logger }),
    async close() {
      await retention.close();
      await jobs.close();
      await store.close();
    },
  };
  if (options.resumeJobs !== false) jobs.resume();
  return service;
}
