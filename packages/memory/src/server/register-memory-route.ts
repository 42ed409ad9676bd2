/**
 * One memory route on the HTTP API: its OpenAPI definition (with the coded error answers), and its
 * handler: input validated, held to a bound key's identity, traced, and done once per Idempotency-Key.
 */
import { createRoute, type OpenAPIHono } from "@hono/zod-openapi";
import { z } from "zod";
import { errorResponseSchema } from "../schemas/common.ts";
import { type MemoryScope, pickScope, scopeKey } from "../scope/memory-scope.ts";
import type { MemoryService } from "../service/memory-service.ts";
import { confine } from "./bound-key-scope.ts";
import { errorResponses } from "./http-errors.ts";
import type { MemoryRoute, MemoryRouteInput } from "./routes.ts";
import { traceMemoryOperation } from "./trace-memory-operation.ts";

const idempotencyKeyHeader = z.object({
  "idempotency-key": z
    .string()
    .optional()
    .describe(
      "Done once per key and tenant: a repeat answers the first answer (Idempotent-Replayed: true), another request under the key answers 422 idempotency_key_reused",
    ),
});

function routeDefinition(route: MemoryRoute) {
  return createRoute({
    method: route.method,
    path: route.path,
    operationId: route.operationId,
    summary: route.summary,
    security: [{ apiKey: [] }],
    request: {
      ...(route.write ? { headers: idempotencyKeyHeader } : {}),
      ...(route.params ? { params: route.params } : {}),
      ...(route.query ? { query: route.query } : {}),
      ...(route.body
        ? { body: { required: true, content: { "application/json": { schema: route.body } } } }
        : {}),
    },
    responses: {
      [route.status]: { description: "OK", content: { "application/json": { schema: route.response } } },
      ...Object.fromEntries(
        Object.entries(errorResponses).map(([status, response]) => [
          status,
          { ...response, content: { "application/json": { schema: errorResponseSchema } } },
        ]),
      ),
    },
  } as Parameters<typeof createRoute>[0]);
}

export function registerMemoryRoute(
  app: OpenAPIHono<{ Variables: { tenantId: string; bound: MemoryScope | undefined } }>,
  route: MemoryRoute,
  service: MemoryService,
): void {
  app.openapi(routeDefinition(route), (async (context: {
    get(key: "tenantId"): string;
    get(key: "bound"): MemoryScope | undefined;
    req: { valid(target: string): unknown; header(name: string): string | undefined };
    json(body: unknown, status: number, headers?: Record<string, string>): Response;
  }) => {
    const unconfined = {
      body: route.body ? context.req.valid("json") : undefined,
      query: route.query ? context.req.valid("query") : undefined,
      params: route.params ? context.req.valid("param") : undefined,
    } as unknown as MemoryRouteInput;
    const tenantId = context.get("tenantId");
    const bound = context.get("bound");
    const input = bound ? confine(route, unconfined, bound) : unconfined;
    const handle = () =>
      traceMemoryOperation(
        route.operationId,
        {
          "memory.tenant_id": tenantId,
          "http.request.method": route.method.toUpperCase(),
          "http.route": route.path,
        },
        () => route.handle(service, tenantId, input),
      );
    const sent = route.write ? context.req.header("idempotency-key") : undefined;
    if (sent === undefined) return context.json(await handle(), route.status);
    // A bound key's idempotency keys are its identity's own: another identity's key is not answered,
    // not even as "reused".
    const key = bound ? `${scopeKey(bound)}:${sent}` : sent;
    const { answer, replayed } = await service.writeOnce(
      tenantId,
      {
        key,
        request: [route.operationId, input.params ?? null, input.query ?? null, input.body ?? null],
        scope: pickScope({
          ...(input.query as object | undefined),
          ...(input.body as object | undefined),
          ...bound,
        }),
      },
      handle,
    );
    return context.json(answer, route.status, replayed ? { "idempotent-replayed": "true" } : {});
  }) as never);
}
