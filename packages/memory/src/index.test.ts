import assert from "node:assert/strict";
import { it } from "node:test";
import * as memory from "./index.ts";
import * as server from "./server/index.ts";

it("@tackle/memory exports exactly its curated names", () => {
  assert.deepEqual(Object.keys(memory).sort(), [
    "DEFAULT_CORE_BLOCKS",
    "DEFAULT_MEMORY_URL",
    "EVENT_ROLES",
    "JOB_STATUSES",
    "JOB_TYPES",
    "MEMORY_KINDS",
    "MEMORY_SCOPE_VALUES",
    "MEMORY_STATUSES",
    "MemoryClient",
    "MemoryError",
    "MemoryMiddlewareError",
    "MemoryNetworkError",
    "MemoryTimeoutError",
    "SsrfRefusedError",
    "TRACE_OPERATIONS",
    "accessSummariesRequestSchema",
    "accessSummariesResponseSchema",
    "accessTrendsRequestSchema",
    "accessTrendsResponseSchema",
    "addMemoryRequestSchema",
    "addMemoryResponseSchema",
    "chainTraceResponseSchema",
    "consolidateRequestSchema",
    "contextBundleRequestSchema",
    "contextBundleResponseSchema",
    "coreMemoryBlockSchema",
    "coreMemoryEditSchema",
    "createMemoryService",
    "createMemoryTools",
    "createSqliteStore",
    "documentSchema",
    "errorResponseSchema",
    "eventSchema",
    "feedbackRequestSchema",
    "getMemoryResponseSchema",
    "importConversationsRequestSchema",
    "ingestDocumentRequestSchema",
    "ingestDocumentResponseSchema",
    "isPrivateAddress",
    "jobResponseSchema",
    "jobSchema",
    "listJobsQuerySchema",
    "listJobsResponseSchema",
    "listTracesQuerySchema",
    "listTracesResponseSchema",
    "memoryHistoryResponseSchema",
    "memorySchema",
    "memoryScopeSchema",
    "memoryScopeShape",
    "noveltyScanRequestSchema",
    "noveltyScanResponseSchema",
    "procedureOutcomeRequestSchema",
    "procedureOutcomeResponseSchema",
    "profileResponseSchema",
    "recallConversationRequestSchema",
    "recallConversationResponseSchema",
    "scopeRequestSchema",
    "searchKnowledgeRequestSchema",
    "searchKnowledgeResponseSchema",
    "searchRequestSchema",
    "searchResponseSchema",
    "selfEditRequestSchema",
    "selfEditResponseSchema",
    "statusResponseSchema",
    "traceResponseSchema",
    "traceSchema",
    "unifiedStateResponseSchema",
    "updateMemoryRequestSchema",
    "writeEventRequestSchema",
    "writeEventResponseSchema",
  ]);
});

it("@tackle/memory/server exports exactly its curated names", () => {
  assert.deepEqual(Object.keys(server).sort(), [
    "DEFAULT_MEMORY_PORT",
    "apiKeyResolver",
    "createMemoryApp",
    "memoryRoutes",
    "openMemoryStore",
    "parseApiKeys",
    "serveMemory",
  ]);
});

it("MEMORY_SCOPE_VALUES is the one tuple every request schema's scope reuses", () => {
  assert.deepEqual(memory.MEMORY_SCOPE_VALUES, ["userId", "agentId", "sessionId"]);
  for (const schema of [
    memory.searchRequestSchema,
    memory.addMemoryRequestSchema,
    memory.writeEventRequestSchema,
  ]) {
    for (const field of memory.MEMORY_SCOPE_VALUES) assert.ok(field in schema.shape, field);
  }
});
