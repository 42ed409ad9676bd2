import assert from "node:assert/strict";
import { it } from "node:test";
import { z } from "zod";
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
    "createMemoryAdminTools",
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
    "purgeRequestSchema",
    "purgeResponseSchema",
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
    "API_KEY_BINDING_FIELDS",
    "DEFAULT_MEMORY_PORT",
    "apiKeyResolver",
    "createMemoryApp",
    "memoryRoutes",
    "openMemoryStore",
    "parseApiKeys",
    "serveMemory",
  ]);
});

/** Request schemas on one memory by id: the scope travels in the query string, not the body. */
const byIdBodies = new Set([
  "updateMemoryRequestSchema",
  "procedureOutcomeRequestSchema",
  "feedbackRequestSchema",
]);

/** Asserts a schema's scope fields are exactly MEMORY_SCOPE_VALUES, each the very same zod field object. */
function assertSharedScope(name: string, schema: z.ZodObject): void {
  const shape = schema.shape as Record<string, z.ZodType>;
  assert.ok(!("tenantId" in shape), `${name}: the tenant comes from the API key, never the request`);
  for (const field of memory.MEMORY_SCOPE_VALUES) {
    assert.ok(field in shape, `${name} lacks scope field ${field}`);
    const shared = memory.memoryScopeShape[field];
    // Recall names one session, so its sessionId is the same field made required.
    if (name === "recallConversationRequestSchema" && field === "sessionId") {
      assert.equal(shape[field], shared.unwrap(), `${name}.${field} is the shared field, required`);
    } else {
      assert.equal(shape[field], shared, `${name}.${field} is not the shared memoryScopeShape field`);
    }
  }
}

it("MEMORY_SCOPE_VALUES is the one tuple every request schema's scope reuses", () => {
  assert.deepEqual(memory.MEMORY_SCOPE_VALUES, ["userId", "agentId", "sessionId"]);
  assert.deepEqual(Object.keys(memory.memoryScopeShape), [...memory.MEMORY_SCOPE_VALUES]);
  assert.equal(memory.memoryScopeSchema.shape.userId, memory.memoryScopeShape.userId);
  const requestSchemas = Object.entries(memory).filter(([name]) => /(Request|Query)Schema$/.test(name));
  assert.ok(requestSchemas.length >= 19, `found only ${requestSchemas.length} request schemas`);
  for (const [name, schema] of requestSchemas) {
    assert.ok(schema instanceof z.ZodObject, `${name} is a zod object`);
    if (byIdBodies.has(name)) {
      for (const field of memory.MEMORY_SCOPE_VALUES)
        assert.ok(!(field in schema.shape), `${name} carries ${field} in the body`);
    } else {
      assertSharedScope(name, schema);
    }
  }
  // Every route's body and query, exported or not (by-id routes take the scope as a query).
  for (const route of server.memoryRoutes) {
    const scoped = [route.body, route.query].filter(
      (schema): schema is z.ZodObject =>
        schema instanceof z.ZodObject && memory.MEMORY_SCOPE_VALUES.some((field) => field in schema.shape),
    );
    if (route.path.includes("{id}") && !route.path.includes("/jobs/") && !route.path.includes("/traces/")) {
      assert.equal(scoped.length, 1, `${route.operationId} takes a scope`);
    }
    for (const schema of scoped) {
      assertSharedScope(
        route.operationId === "recallConversation" ? "recallConversationRequestSchema" : route.operationId,
        schema,
      );
    }
  }
});
