/** Administration: status, novelty scans, jobs (consolidation, imports), access statistics, traces. */
import { MemoryError } from "../errors/memory-error.ts";
import {
  accessSummariesRequestSchema,
  accessTrendsRequestSchema,
  consolidateRequestSchema,
  importConversationsRequestSchema,
  listJobsQuerySchema,
  listTracesQuerySchema,
  noveltyScanRequestSchema,
} from "../schemas/admin.ts";
import { pickScope, scopeContains } from "../scope/memory-scope.ts";
import type { JobRunner } from "./job-runner.ts";
import type { MemoryService } from "./memory-service.ts";
import type { NoveltyCheck } from "./novelty-check.ts";
import { parseRequest } from "./parse-request.ts";
import { quotaUsage } from "./quotas.ts";
import type { ServiceContext } from "./service-context.ts";

export type AdminOperations = Pick<
  MemoryService,
  | "status"
  | "noveltyScan"
  | "consolidate"
  | "importConversations"
  | "accessTrends"
  | "accessSummaries"
  | "listTraces"
  | "getTrace"
  | "listJobs"
  | "getJob"
>;

const packageVersion = "0.1.0";

export function createAdminOperations(
  context: ServiceContext,
  novelty: NoveltyCheck,
  jobs: JobRunner,
): AdminOperations {
  const { store, embedder, languageModel } = context;
  const startedAt = Date.now();
  return {
    async status(tenantId, scope = {}) {
      return {
        ok: true,
        version: packageVersion,
        store: store.kind,
        retrieval: embedder ? "fused" : "bm25",
        ...(embedder ? { embeddingModel: embedder.modelId } : {}),
        ...(languageModel ? { languageModel: `${languageModel.provider}:${languageModel.modelId}` } : {}),
        tenant: tenantId,
        counts: await store.counts(tenantId, scope),
        // Tenant-wide: answered only when the status is asked for the whole tenant (a key bound to
        // one identity is answered its own counts, never what the rest of its tenant stores).
        ...(Object.values(scope).some((value) => value !== undefined)
          ? {}
          : { quotas: await quotaUsage(store, tenantId, context.quotas) }),
        uptimeSeconds: Math.round((Date.now() - startedAt) / 1000),
      };
    },

    noveltyScan: (tenantId, request) => noveltyScan(context, novelty, jobs, tenantId, request),

    async consolidate(tenantId, request) {
      const input = parseRequest(consolidateRequestSchema, request);
      return { job: await jobs.enqueue(tenantId, "consolidate", pickScope(input), input) };
    },

    async importConversations(tenantId, request) {
      const input = parseRequest(importConversationsRequestSchema, request);
      return { job: await jobs.enqueue(tenantId, "import", pickScope(input), input) };
    },

    accessTrends: (tenantId, request) => accessTrends(context, tenantId, request),

    accessSummaries: (tenantId, request) => accessSummaries(context, tenantId, request),

    async listTraces(tenantId, request) {
      const input = parseRequest(listTracesQuerySchema, request);
      const traces = await store.listTraces(tenantId, pickScope(input), {
        limit: input.limit,
        ...(input.operation ? { operation: input.operation } : {}),
      });
      return { traces: traces.map(({ tenantId: _tenant, ...trace }) => trace) };
    },

    async getTrace(tenantId, id, scope = {}) {
      const trace = await store.getTrace(tenantId, id);
      if (!trace || !scopeContains(scope, trace)) throw MemoryError.notFound("Trace", id);
      const { tenantId: _tenant, ...rest } = trace;
      return { trace: rest };
    },

    async listJobs(tenantId, request) {
      const input = parseRequest(listJobsQuerySchema, request);
      const list = await store.listJobs(tenantId, pickScope(input), {
        limit: input.limit,
        ...(input.type ? { type: input.type } : {}),
        ...(input.status ? { status: input.status } : {}),
      });
      return { jobs: list.map(({ tenantId: _tenant, ...job }) => job) };
    },

    async getJob(tenantId, id, scope = {}) {
      const job = await store.getJob(tenantId, id);
      if (!job || !scopeContains(scope, job)) throw MemoryError.notFound("Job", id);
      const { tenantId: _tenant, ...rest } = job;
      return { job: rest };
    },
  };
}

/** Which candidates are new to the scope, each with its nearest memory; recorded as a finished job. */
async function noveltyScan(
  { embedOne }: ServiceContext,
  { nearestMemory }: NoveltyCheck,
  jobs: JobRunner,
  tenantId: string,
  request: Parameters<AdminOperations["noveltyScan"]>[1],
): ReturnType<AdminOperations["noveltyScan"]> {
  const input = parseRequest(noveltyScanRequestSchema, request);
  const scope = pickScope(input);
  const results = [];
  for (const content of input.candidates) {
    const nearest = await nearestMemory(tenantId, scope, content, await embedOne(content));
    results.push({
      content,
      novel: !nearest || nearest.similarity < input.threshold,
      ...(nearest
        ? {
            nearest: {
              memoryId: nearest.memory.id,
              content: nearest.memory.content,
              similarity: Number(nearest.similarity.toFixed(4)),
            },
          }
        : {}),
    });
  }
  // The record names each nearest memory by id, without its text (ADR 0564): the memory may lie in a
  // narrower scope, and a purge of that scope leaves this record, which must not keep a copy of it.
  const recorded = results.map(({ nearest, ...result }) => ({
    ...result,
    ...(nearest ? { nearest: { memoryId: nearest.memoryId, similarity: nearest.similarity } } : {}),
  }));
  const job = await jobs.record(tenantId, "novelty_scan", scope, input, { results: recorded });
  return { jobId: job.id, results };
}

/** Searches, hits and reads per day over the last `days` days, a zero row for a quiet day. */
async function accessTrends(
  { store, clock }: ServiceContext,
  tenantId: string,
  request: Parameters<AdminOperations["accessTrends"]>[1],
): ReturnType<AdminOperations["accessTrends"]> {
  const input = parseRequest(accessTrendsRequestSchema, request);
  const today = clock();
  const since = new Date(today.getTime() - (input.days - 1) * 86_400_000).toISOString().slice(0, 10);
  const rows = new Map(
    (await store.accessTrends(tenantId, pickScope(input), since)).map((row) => [row.day, row]),
  );
  const days = [];
  for (let offset = input.days - 1; offset >= 0; offset -= 1) {
    const day = new Date(today.getTime() - offset * 86_400_000).toISOString().slice(0, 10);
    days.push(rows.get(day) ?? { day, searches: 0, hits: 0, reads: 0 });
  }
  return { days };
}

/** How much of the scope is read: totals, and the most accessed memories. */
async function accessSummaries(
  { store }: ServiceContext,
  tenantId: string,
  request: Parameters<AdminOperations["accessSummaries"]>[1],
): ReturnType<AdminOperations["accessSummaries"]> {
  const input = parseRequest(accessSummariesRequestSchema, request);
  const scope = pickScope(input);
  // Counted in the store: only the `limit` most accessed memories are read.
  const [counts, accessed, top, searches] = await Promise.all([
    store.countMemories(tenantId, scope),
    store.countAccessedMemories(tenantId, scope),
    store.listMemories(tenantId, scope, { statuses: ["active"], limit: input.limit, order: "accessed" }),
    store.countSearches(tenantId, scope),
  ]);
  return {
    totals: { memories: counts.active, accessed, neverAccessed: counts.active - accessed, searches },
    top: top
      .filter((memory) => memory.accessCount > 0)
      .map((memory) => ({
        memoryId: memory.id,
        content: memory.content,
        accessCount: memory.accessCount,
        ...(memory.lastAccessedAt ? { lastAccessedAt: memory.lastAccessedAt } : {}),
      })),
  };
}
