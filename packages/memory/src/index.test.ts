import assert from "node:assert/strict";
import { it } from "node:test";
import { z } from "zod";
import * as memory from "./index.ts";
import * as schemas from "./schemas/index.ts";
import * as server from "./server/index.ts";

it("@tackle/memory exports exactly its curated names", () => {
  assert.deepEqual(Object.keys(memory).sort(), [
    "DEFAULT_MEMORY_URL",
    "MemoryClient",
    "MemoryError",
    "MemoryMiddlewareError",
    "MemoryNetworkError",
    "MemoryTimeoutError",
    "SsrfRefusedError",
    "createMemoryAdminTools",
    "createMemoryService",
    "createMemoryTools",
    "createSqliteStore",
    "isPrivateAddress",
    "splitChatExport",
  ]);
});

it("@tackle/memory/schemas holds the wire schemas and their value lists, nothing else", () => {
  for (const [name, value] of Object.entries(schemas)) {
    const isSchema = value instanceof z.ZodType;
    const isValueList = /^[A-Z][A-Z_]+$/.test(name);
    assert.ok(isSchema || isValueList || name === "memoryScopeShape", `${name} is not a wire schema`);
  }
  assert.ok(Object.keys(schemas).length >= 50);
});

it("@tackle/memory/server exports exactly its curated names", () => {
  assert.deepEqual(Object.keys(server).sort(), [
    "API_KEY_BINDING_FIELDS",
    "ApiKeysConfigError",
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
  for (const field of schemas.MEMORY_SCOPE_VALUES) {
    assert.ok(field in shape, `${name} lacks scope field ${field}`);
    const shared = schemas.memoryScopeShape[field];
    // Recall names one session, so its sessionId is the same field made required.
    if (name === "recallConversationRequestSchema" && field === "sessionId") {
      assert.equal(shape[field], shared.unwrap(), `${name}.${field} is the shared field, required`);
    } else {
      assert.equal(shape[field], shared, `${name}.${field} is not the shared memoryScopeShape field`);
    }
  }
}

it("MEMORY_SCOPE_VALUES is the one tuple every request schema's scope reuses", () => {
  assert.deepEqual(schemas.MEMORY_SCOPE_VALUES, ["userId", "agentId", "sessionId"]);
  assert.deepEqual(Object.keys(schemas.memoryScopeShape), [...schemas.MEMORY_SCOPE_VALUES]);
  assert.equal(schemas.memoryScopeSchema.shape.userId, schemas.memoryScopeShape.userId);
  const requestSchemas = Object.entries(schemas).filter(([name]) => /(Request|Query)Schema$/.test(name));
  assert.ok(requestSchemas.length >= 19, `found only ${requestSchemas.length} request schemas`);
  // A request of several shapes (the import's, by format) is a union of objects: each is checked.
  const objects = (schema: unknown): unknown[] =>
    schema instanceof z.ZodDiscriminatedUnion ? [...schema.options] : [schema];
  for (const [name, schema] of requestSchemas.flatMap(([name, schema]) =>
    objects(schema).map((option) => [name, option] as const),
  )) {
    assert.ok(schema instanceof z.ZodObject, `${name} is a zod object`);
    if (byIdBodies.has(name)) {
      for (const field of schemas.MEMORY_SCOPE_VALUES)
        assert.ok(!(field in schema.shape), `${name} carries ${field} in the body`);
    } else {
      assertSharedScope(name, schema);
    }
  }
  // Every route's body and query, exported or not (by-id routes take the scope as a query).
  for (const route of server.memoryRoutes) {
    const scoped = [...objects(route.body), route.query].filter(
      (schema): schema is z.ZodObject =>
        schema instanceof z.ZodObject && schemas.MEMORY_SCOPE_VALUES.some((field) => field in schema.shape),
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
