/** The memory service's HTTP API: Hono routes from zod schemas, API-key tenancy, coded errors. */
import { createRoute, OpenAPIHono } from "@hono/zod-openapi";
import { type Logger, silentLogger, ToolError } from "@tackle/core";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { z } from "zod";
import { MemoryError } from "../errors/memory-error.ts";
import { errorResponseSchema } from "../schemas/common.ts";
import { type MemoryScope, pickScope, scopeKey } from "../scope/memory-scope.ts";
import type { MemoryService } from "../service/memory-service.ts";
import {
  API_KEY_BINDING_FIELDS,
  type ApiKeyEntry,
  type ApiKeyGrant,
  type ApiKeyResolver,
  apiKeyResolver,
  checkGrant,
} from "./api-keys.ts";
import { createRateLimiter, type RateLimit } from "./rate-limiter.ts";
import { type MemoryRoute, type MemoryRouteInput, memoryRoutes } from "./routes.ts";
import { traceMemoryOperation } from "./trace-memory-operation.ts";
import { withRouteExamples } from "./with-route-examples.ts";

export interface MemoryAppOptions {
  readonly service: MemoryService;
  /**
   * `{ key: tenant }`, `{ key: { tenant, userId?, agentId? } }` for a key bound to one identity
   * (ADR 0357), or a function resolving a key to either.
   */
  readonly apiKeys: Readonly<Record<string, ApiKeyEntry>> | ApiKeyResolver;
  readonly logger?: Logger;
  /** Largest request body accepted, in bytes (default 4 MiB). */
  readonly maxBodyBytes?: number;
  /** Per-tenant request rate; over it the API answers 429 with `Retry-After`. Default: no limit. */
  readonly rateLimit?: RateLimit;
}

type Variables = { tenantId: string; bound: MemoryScope | undefined };

/** The identity a bound key acts as; undefined for an unbound key. */
function boundScope(grant: ApiKeyGrant): MemoryScope | undefined {
  const scope = pickScope(grant);
  return API_KEY_BINDING_FIELDS.some((field) => scope[field] !== undefined) ? scope : undefined;
}

function forbidden(message: string, data?: Record<string, unknown>): MemoryError {
  return new MemoryError("scope_forbidden", message, 403, data ? { data } : {});
}

function takesScope(schema: unknown): boolean {
  const shape = (schema as { shape?: Record<string, unknown> } | undefined)?.shape;
  return shape !== undefined && API_KEY_BINDING_FIELDS.every((field) => field in shape);
}

/**
 * A bound key's request, confined to its identity: every identity field the key fixes is filled in
 * where absent and refused where it names anyone else. A route that takes no identity fields and does
 * not read the key's scope itself is refused: a route added without a scope check fails closed.
 */
function confine(route: MemoryRoute, input: MemoryRouteInput, bound: MemoryScope): MemoryRouteInput {
  if (route.admin) {
    throw forbidden(
      `${route.operationId} spans the whole tenant; an API key bound to one identity may not call it`,
    );
  }
  const targets = (["body", "query"] as const).filter((target) => takesScope(route[target]));
  const asked = [input.body, input.query] as unknown as ({ wholeTenant?: unknown } | undefined)[];
  if (asked.some((values) => values?.wholeTenant === true || values?.wholeTenant === "true")) {
    throw forbidden(
      `${route.operationId} with wholeTenant reads every scope; this API key acts only as its own identity`,
    );
  }
  if (targets.length === 0 && !route.scopeFromKey) {
    throw forbidden(`${route.operationId} is not open to an API key bound to one identity`);
  }
  const confined: Record<string, unknown> = { ...input };
  for (const target of targets) {
    const values = { ...(input[target] as Record<string, unknown>) };
    for (const field of API_KEY_BINDING_FIELDS) {
      const own = bound[field];
      if (own === undefined) continue;
      if (values[field] !== undefined && values[field] !== own) {
        throw forbidden(`This API key acts only as its own ${field}; the request names another`, {
          field,
        });
      }
      values[field] = own;
    }
    confined[target] = values;
  }
  return { ...(confined as unknown as MemoryRouteInput), bound };
}

function errorBody(error: ToolError) {
  return { error: error.toJSON() } as {
    error: { code: string; message: string; retryable: boolean; data?: unknown };
  };
}

const errorResponses = {
  400: { description: "Invalid input; `error.data.issues` lists why. Nothing was stored." },
  401: { description: "Missing or unknown API key" },
  403: {
    description:
      "`scope_forbidden`: the API key is bound to one identity and the request names another, or the route spans the tenant",
  },
  404: { description: "Not found in this tenant" },
  409: {
    description:
      "Conflict (version, duplicate); Idempotency-Key still in use (retryable), or its write done but its answer too large to keep",
  },
  429: { description: "Over the tenant's rate limit; see Retry-After" },
  422: {
    description:
      "Edit refused (no match, ambiguous, over capacity); Idempotency-Key reused for another request",
  },
};

const idempotencyKeyHeader = z.object({
  "idempotency-key": z
    .string()
    .optional()
    .describe(
      "Done once per key and tenant: a repeat answers the first answer (Idempotent-Replayed: true), another request under the key answers 422 idempotency_key_reused",
    ),
});

export function createMemoryApp(options: MemoryAppOptions) {
  const logger = options.logger ?? silentLogger;
  const resolve = typeof options.apiKeys === "function" ? options.apiKeys : apiKeyResolver(options.apiKeys);
  const limiter = options.rateLimit ? createRateLimiter(options.rateLimit) : undefined;
  const app = new OpenAPIHono<{ Variables: Variables }>({
    defaultHook: (result, context) => {
      if (result.success) return;
      const issues = result.error.issues.map((issue) => ({
        path: issue.path.filter((key) => typeof key !== "symbol"),
        message: issue.message,
      }));
      const summary = issues
        .map((issue) => `${issue.path.join(".") || "(root)"}: ${issue.message}`)
        .join("; ");
      const error = new MemoryError("invalid_input", `Invalid request (${result.target}): ${summary}`, 400, {
        data: { issues },
      });
      return context.json(errorBody(error), 400);
    },
  });

  app.onError((error, context) => {
    if (MemoryError.isInstance(error))
      return context.json(errorBody(error), error.status as ContentfulStatusCode);
    if (error instanceof HTTPException && error.status === 415) {
      const refusal = new MemoryError(
        "invalid_input",
        "Send the body as JSON, with the header `Content-Type: application/json`",
        415,
        { data: { expected: "application/json", received: context.req.header("content-type") ?? null } },
      );
      return context.json(errorBody(refusal), 415);
    }
    if (error instanceof HTTPException) {
      const code =
        error.status === 413 ? "payload_too_large" : error.status === 401 ? "unauthorized" : "invalid_input";
      const message =
        error.message ||
        (error.status === 413
          ? "The request body is larger than the service accepts"
          : "The request was refused");
      return context.json(errorBody(new MemoryError(code, message, error.status)), error.status);
    }
    if (ToolError.isInstance(error)) return context.json(errorBody(error), 400);
    logger.error("memory request failed", { path: context.req.path, error: (error as Error)?.message });
    return context.json(
      errorBody(new MemoryError("internal", "The memory service failed; see its log", 500)),
      500,
    );
  });
  app.notFound((context) =>
    context.json(
      errorBody(
        new MemoryError("not_found", `No route ${context.req.method} ${context.req.path}`, 404, {
          data: { resource: "route", id: `${context.req.method} ${context.req.path}` },
        }),
      ),
      404,
    ),
  );

  app.get("/health", (context) => context.json({ ok: true }));
  app.openAPIRegistry.registerComponent("securitySchemes", "apiKey", { type: "http", scheme: "bearer" });

  app.use("/v1/*", bodyLimit({ maxSize: options.maxBodyBytes ?? 4 * 1024 * 1024 }));
  app.use("/v1/*", async (context, next) => {
    const header = context.req.header("authorization");
    const apiKey = header?.startsWith("Bearer ") ? header.slice(7).trim() : context.req.header("x-api-key");
    const entry = apiKey ? await resolve(apiKey) : undefined;
    const grant = entry === undefined ? undefined : checkGrant(entry);
    const tenantId = grant?.tenant;
    if (!tenantId) {
      throw new MemoryError("unauthorized", "Send a valid API key as `Authorization: Bearer <key>`", 401);
    }
    const waitSeconds = limiter?.take(tenantId) ?? 0;
    if (waitSeconds > 0) {
      const retryAfter = Math.max(1, Math.ceil(waitSeconds));
      const error = new MemoryError("rate_limited", `Too many requests; retry in ${retryAfter} s`, 429, {
        data: { retryAfterSeconds: retryAfter },
      });
      return context.json(errorBody(error), 429, { "retry-after": String(retryAfter) });
    }
    context.set("tenantId", tenantId);
    context.set("bound", boundScope(grant!));
    await next();
  });

  for (const route of memoryRoutes) {
    const definition = createRoute({
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
    app.openapi(definition, (async (context: {
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
          () => route.handle(options.service, tenantId, input),
        );
      const sent = route.write ? context.req.header("idempotency-key") : undefined;
      if (sent === undefined) return context.json(await handle(), route.status);
      // A bound key's idempotency keys are its identity's own: another identity's key is not answered,
      // not even as "reused".
      const key = bound ? `${scopeKey(bound)}:${sent}` : sent;
      const { answer, replayed } = await options.service.writeOnce(
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
  // Generated once, after every route is registered; each route's example request filled in.
  let document: object | undefined;
  app.get("/openapi.json", (context) => {
    document ??= withRouteExamples(
      app.getOpenAPI31Document({
        openapi: "3.1.0",
        info: { title: "Tackle memory service", version: "0.1.0" },
      }),
    );
    return context.json(document);
  });
  return app;
}
