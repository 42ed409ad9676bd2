/** The HTTP API's routes: method, path, schemas, and the service operation each one calls. */
import type { z } from "zod";
import {
  accessSummariesRequestSchema,
  accessSummariesResponseSchema,
  accessTrendsRequestSchema,
  accessTrendsResponseSchema,
  consolidateRequestSchema,
  importConversationsRequestSchema,
  jobResponseSchema,
  listJobsQuerySchema,
  listJobsResponseSchema,
  listTracesQuerySchema,
  listTracesResponseSchema,
  noveltyScanRequestSchema,
  noveltyScanResponseSchema,
  traceResponseSchema,
} from "../schemas/admin.ts";
import { chainTraceResponseSchema } from "../schemas/chain.ts";
import { selfEditRequestSchema, selfEditResponseSchema } from "../schemas/core-memory.ts";
import {
  recallConversationRequestSchema,
  recallConversationResponseSchema,
  writeEventRequestSchema,
  writeEventResponseSchema,
} from "../schemas/event.ts";
import {
  ingestDocumentRequestSchema,
  ingestDocumentResponseSchema,
  searchKnowledgeRequestSchema,
  searchKnowledgeResponseSchema,
} from "../schemas/knowledge.ts";
import {
  addMemoriesRequestSchema,
  addMemoriesResponseSchema,
  addMemoryRequestSchema,
  addMemoryResponseSchema,
  deleteMemoryQuerySchema,
  feedbackRequestSchema,
  getMemoryResponseSchema,
  listMemoriesQuerySchema,
  listMemoriesResponseSchema,
  memoryHistoryResponseSchema,
  memoryIdParamsSchema,
  memoryScopeQuerySchema,
  procedureOutcomeRequestSchema,
  procedureOutcomeResponseSchema,
  searchRequestSchema,
  searchResponseSchema,
  updateMemoryRequestSchema,
} from "../schemas/memory.ts";
import { purgeRequestSchema, purgeResponseSchema } from "../schemas/purge.ts";
import {
  contextBundleRequestSchema,
  contextBundleResponseSchema,
  profileResponseSchema,
  scopeRequestSchema,
  statusResponseSchema,
  unifiedStateResponseSchema,
} from "../schemas/synthesis.ts";
import { type MemoryScope, pickScope } from "../scope/memory-scope.ts";
import type { MemoryService } from "../service/memory-service.ts";

export interface MemoryRouteInput {
  readonly body: never;
  readonly query: never;
  readonly params: { readonly id: string };
  /** The identity of a key bound to one (ADR 0357); absent for an unbound key. */
  readonly bound?: MemoryScope;
}

export interface MemoryRoute {
  /** Also the `MemoryClient` method name. */
  readonly operationId: string;
  readonly method: "get" | "post" | "patch" | "delete";
  /** OpenAPI style: `/v1/memories/{id}`. */
  readonly path: string;
  readonly summary: string;
  readonly body?: z.ZodType;
  readonly query?: z.ZodObject;
  readonly params?: z.ZodObject;
  /** 202 for operations that start a job. */
  readonly status: 200 | 201 | 202;
  /** A write: done once per `Idempotency-Key`, and the client sends one with every call (ADR 0356). */
  readonly write?: true;
  /** Spans the tenant: refused for an API key bound to one identity. */
  readonly admin?: true;
  /** Takes no identity fields but confines its answer to `input.bound` itself. */
  readonly scopeFromKey?: true;
  readonly response: z.ZodType;
  readonly handle: (service: MemoryService, tenantId: string, input: MemoryRouteInput) => Promise<unknown>;
}

const params = memoryIdParamsSchema;

export const memoryRoutes: readonly MemoryRoute[] = [
  {
    operationId: "search",
    method: "post",
    path: "/v1/memories/search",
    summary: "Search memories (BM25, fused with vectors when an embedding model is configured)",
    body: searchRequestSchema,
    status: 200,
    response: searchResponseSchema,
    handle: (service, tenant, input) => service.search(tenant, input.body),
  },
  {
    operationId: "add",
    method: "post",
    path: "/v1/memories",
    summary: "Add a memory, unless the same fact is already stored in the scope",
    body: addMemoryRequestSchema,
    write: true,
    status: 200,
    response: addMemoryResponseSchema,
    handle: (service, tenant, input) => service.add(tenant, input.body),
  },
  {
    operationId: "addBatch",
    method: "post",
    path: "/v1/memories/batch",
    summary: "Add many memories of one scope in one transaction (each deduplicated like add)",
    body: addMemoriesRequestSchema,
    write: true,
    status: 200,
    response: addMemoriesResponseSchema,
    handle: (service, tenant, input) => service.addBatch(tenant, input.body),
  },
  {
    operationId: "listMemories",
    method: "get",
    path: "/v1/memories",
    summary: "List a scope's memories, the latest written first, a page at a time (nextCursor continues)",
    query: listMemoriesQuerySchema,
    status: 200,
    response: listMemoriesResponseSchema,
    handle: (service, tenant, input) => service.listMemories(tenant, input.query),
  },
  {
    operationId: "getMemory",
    method: "get",
    path: "/v1/memories/{id}",
    summary: "Get one memory",
    params,
    status: 200,
    response: getMemoryResponseSchema,
    query: memoryScopeQuerySchema,
    handle: (service, tenant, input) => service.getMemory(tenant, input.params.id, pickScope(input.query)),
  },
  {
    operationId: "updateMemory",
    method: "patch",
    path: "/v1/memories/{id}",
    summary: "Update a memory (a new version; the old one stays in its history)",
    params,
    body: updateMemoryRequestSchema,
    write: true,
    status: 200,
    response: getMemoryResponseSchema,
    query: memoryScopeQuerySchema,
    handle: (service, tenant, input) =>
      service.updateMemory(tenant, input.params.id, input.body, pickScope(input.query)),
  },
  {
    operationId: "deleteMemory",
    method: "delete",
    path: "/v1/memories/{id}",
    summary: "Soft-delete a memory (kept with its history)",
    params,
    query: deleteMemoryQuerySchema.extend(memoryScopeQuerySchema.shape),
    write: true,
    status: 200,
    response: getMemoryResponseSchema,
    handle: (service, tenant, input) =>
      service.deleteMemory(
        tenant,
        input.params.id,
        reasonOf(input.query as { reason?: string }),
        pickScope(input.query),
      ),
  },
  {
    operationId: "memoryHistory",
    method: "get",
    path: "/v1/memories/{id}/history",
    summary: "Every version of a memory",
    params,
    status: 200,
    response: memoryHistoryResponseSchema,
    query: memoryScopeQuerySchema,
    handle: (service, tenant, input) =>
      service.memoryHistory(tenant, input.params.id, pickScope(input.query)),
  },
  {
    operationId: "chainTrace",
    method: "get",
    path: "/v1/memories/{id}/chain",
    summary: "A memory's provenance: versions, source events, import job, merged memories",
    params,
    status: 200,
    response: chainTraceResponseSchema,
    query: memoryScopeQuerySchema,
    handle: (service, tenant, input) => service.chainTrace(tenant, input.params.id, pickScope(input.query)),
  },
  {
    operationId: "recordProcedureOutcome",
    method: "post",
    path: "/v1/memories/{id}/outcomes",
    summary: "Record whether following a procedure memory worked",
    params,
    body: procedureOutcomeRequestSchema,
    write: true,
    status: 200,
    response: procedureOutcomeResponseSchema,
    query: memoryScopeQuerySchema,
    handle: (service, tenant, input) =>
      service.recordProcedureOutcome(tenant, input.params.id, input.body, pickScope(input.query)),
  },
  {
    operationId: "recordFeedback",
    method: "post",
    path: "/v1/memories/{id}/feedback",
    summary: "Mark a memory helpful or unhelpful (moves its ranking)",
    params,
    body: feedbackRequestSchema,
    write: true,
    status: 200,
    response: getMemoryResponseSchema,
    query: memoryScopeQuerySchema,
    handle: (service, tenant, input) =>
      service.recordFeedback(tenant, input.params.id, input.body, pickScope(input.query)),
  },
  {
    operationId: "writeEvent",
    method: "post",
    path: "/v1/events",
    summary: "Append a conversation event (idempotent by customId)",
    body: writeEventRequestSchema,
    write: true,
    status: 200,
    response: writeEventResponseSchema,
    handle: (service, tenant, input) => service.writeEvent(tenant, input.body),
  },
  {
    operationId: "recallConversation",
    method: "post",
    path: "/v1/conversations/recall",
    summary: "A session's events, paged by cursor",
    body: recallConversationRequestSchema,
    status: 200,
    response: recallConversationResponseSchema,
    handle: (service, tenant, input) => service.recallConversation(tenant, input.body),
  },
  {
    operationId: "ingestDocument",
    method: "post",
    path: "/v1/knowledge/documents",
    summary: "Ingest a knowledge-base document (chunked; idempotent by content)",
    body: ingestDocumentRequestSchema,
    write: true,
    status: 200,
    response: ingestDocumentResponseSchema,
    handle: (service, tenant, input) => service.ingestDocument(tenant, input.body),
  },
  {
    operationId: "searchKnowledge",
    method: "post",
    path: "/v1/knowledge/search",
    summary: "Search knowledge-base chunks",
    body: searchKnowledgeRequestSchema,
    status: 200,
    response: searchKnowledgeResponseSchema,
    handle: (service, tenant, input) => service.searchKnowledge(tenant, input.body),
  },
  {
    operationId: "selfEdit",
    method: "post",
    path: "/v1/core-memory",
    summary: "Edit core memory blocks atomically (an empty edit list reads them)",
    body: selfEditRequestSchema,
    write: true,
    status: 200,
    response: selfEditResponseSchema,
    handle: (service, tenant, input) => service.selfEdit(tenant, input.body),
  },
  {
    operationId: "profile",
    method: "post",
    path: "/v1/profile",
    summary: "The profile synthesized from a scope's memories",
    body: scopeRequestSchema,
    status: 200,
    response: profileResponseSchema,
    handle: (service, tenant, input) => service.profile(tenant, input.body),
  },
  {
    operationId: "contextBundle",
    method: "post",
    path: "/v1/context",
    summary: "Profile, core memory, relevant memories and recent events within a token budget",
    body: contextBundleRequestSchema,
    status: 200,
    response: contextBundleResponseSchema,
    handle: (service, tenant, input) => service.contextBundle(tenant, input.body),
  },
  {
    operationId: "unifiedState",
    method: "post",
    path: "/v1/state",
    summary: "Everything about a scope at a glance",
    body: scopeRequestSchema,
    status: 200,
    response: unifiedStateResponseSchema,
    handle: (service, tenant, input) => service.unifiedState(tenant, input.body),
  },
  {
    operationId: "status",
    method: "get",
    path: "/v1/status",
    summary: "Service status and this tenant's counts (a bound key's: its identity's)",
    status: 200,
    scopeFromKey: true,
    response: statusResponseSchema,
    handle: (service, tenant, input) => service.status(tenant, input.bound),
  },
  {
    operationId: "noveltyScan",
    method: "post",
    path: "/v1/novelty-scan",
    summary: "Which candidate facts are new to a scope",
    body: noveltyScanRequestSchema,
    write: true,
    status: 200,
    response: noveltyScanResponseSchema,
    handle: (service, tenant, input) => service.noveltyScan(tenant, input.body),
  },
  {
    operationId: "consolidate",
    method: "post",
    path: "/v1/jobs/consolidate",
    summary: "Start a consolidation job (merge near-duplicates, decay stale memories)",
    body: consolidateRequestSchema,
    write: true,
    status: 202,
    response: jobResponseSchema,
    handle: (service, tenant, input) => service.consolidate(tenant, input.body),
  },
  {
    operationId: "importConversations",
    method: "post",
    path: "/v1/jobs/import",
    summary:
      "Start an import job for OpenAI- or Anthropic-style transcripts or a ChatGPT or Claude export (idempotent)",
    body: importConversationsRequestSchema,
    write: true,
    status: 202,
    response: jobResponseSchema,
    handle: (service, tenant, input) => service.importConversations(tenant, input.body),
  },
  {
    operationId: "listJobs",
    method: "get",
    path: "/v1/jobs",
    summary: "Jobs, newest first",
    query: listJobsQuerySchema,
    status: 200,
    response: listJobsResponseSchema,
    handle: (service, tenant, input) => service.listJobs(tenant, input.query),
  },
  {
    operationId: "getJob",
    method: "get",
    path: "/v1/jobs/{id}",
    summary: "One job with its result",
    params,
    query: memoryScopeQuerySchema,
    status: 200,
    response: jobResponseSchema,
    handle: (service, tenant, input) => service.getJob(tenant, input.params.id, pickScope(input.query)),
  },
  {
    operationId: "accessTrends",
    method: "post",
    path: "/v1/admin/access-trends",
    admin: true,
    summary: "Searches, hits and reads per day",
    body: accessTrendsRequestSchema,
    status: 200,
    response: accessTrendsResponseSchema,
    handle: (service, tenant, input) => service.accessTrends(tenant, input.body),
  },
  {
    operationId: "accessSummaries",
    method: "post",
    path: "/v1/admin/access-summaries",
    admin: true,
    summary: "Most used memories and totals",
    body: accessSummariesRequestSchema,
    status: 200,
    response: accessSummariesResponseSchema,
    handle: (service, tenant, input) => service.accessSummaries(tenant, input.body),
  },
  {
    operationId: "purge",
    method: "post",
    path: "/v1/admin/purge",
    admin: true,
    summary:
      "Delete a scope for good: memories, versions, events, documents, core blocks, traces, jobs, access records, kept answers",
    body: purgeRequestSchema,
    status: 200,
    response: purgeResponseSchema,
    handle: (service, tenant, input) => service.purge(tenant, input.body),
  },
  {
    operationId: "listTraces",
    method: "get",
    path: "/v1/traces",
    summary: "Retrieval traces, newest first (every search is recorded)",
    query: listTracesQuerySchema,
    status: 200,
    response: listTracesResponseSchema,
    handle: (service, tenant, input) => service.listTraces(tenant, input.query),
  },
  {
    operationId: "getTrace",
    method: "get",
    path: "/v1/traces/{id}",
    summary: "One retrieval trace",
    params,
    query: memoryScopeQuerySchema,
    status: 200,
    response: traceResponseSchema,
    handle: (service, tenant, input) => service.getTrace(tenant, input.params.id, pickScope(input.query)),
  },
];

/** The `reason` of a delete's query, alone (the query also holds the scope's fields). */
function reasonOf(query: { reason?: string }): { reason?: string } {
  return query.reason === undefined ? {} : { reason: query.reason };
}
