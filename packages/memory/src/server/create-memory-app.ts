/** The memory service's HTTP API: Hono routes from zod schemas, API-key tenancy, coded errors. */
import { OpenAPIHono } from "@hono/zod-openapi";
import { type Logger, silentLogger } from "@tackle/core";
import { createPlaces, type Places } from "@tackle/core/internal";
import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { MemoryError } from "../errors/memory-error.ts";
import type { MemoryScope } from "../scope/memory-scope.ts";
import type { MemoryService } from "../service/memory-service.ts";
import { type ApiKeyEntry, type ApiKeyResolver, apiKeyResolver, checkGrant } from "./api-keys.ts";
import { boundScope } from "./bound-key-scope.ts";
import { answerError, errorBody, invalidRequest } from "./http-errors.ts";
import { createRateLimiter, type RateLimit } from "./rate-limiter.ts";
import { registerMemoryRoute } from "./register-memory-route.ts";
import { memoryRoutes } from "./routes.ts";
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
  /**
   * Requests with a body one tenant may have in flight at once (default 64): past it 429 with
   * `Retry-After`, before the body is read, so a tenant streaming many bodies slowly holds at most this
   * many of them in the host's memory and leaves the others' requests alone. A whole number of at
   * least 1: anything else is a `RangeError` naming `maxInFlight` when the app is made.
   */
  readonly maxInFlight?: number;
}

/** The default of `maxInFlight`: 64 bodies of up to 4 MiB, 256 MiB a tenant at most. */
export const DEFAULT_MAX_IN_FLIGHT = 64;

type Variables = { tenantId: string; bound: MemoryScope | undefined };

export function createMemoryApp(options: MemoryAppOptions) {
  const logger = options.logger ?? silentLogger;
  const resolve = typeof options.apiKeys === "function" ? options.apiKeys : apiKeyResolver(options.apiKeys);
  const limiter = options.rateLimit ? createRateLimiter(options.rateLimit) : undefined;
  // Checked here, before any request: a bound of 0 would refuse every write, 1.5 or NaN bound nothing.
  const inFlight = createPlaces({ max: options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT, name: "maxInFlight" });
  const app = new OpenAPIHono<{ Variables: Variables }>({
    defaultHook: (result, context) => {
      if (result.success) return;
      return context.json(errorBody(invalidRequest(result.target, result.error.issues)), 400);
    },
  });

  app.onError(answerError(logger));
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

  // The key, the tenant's rate and its place in flight first, from the headers alone: the body limit
  // reads a body without a length whole, so a slow chunked body before it was held uncounted.
  app.use("/v1/*", authenticate(resolve, limiter, inFlight));
  app.use("/v1/*", bodyLimit({ maxSize: options.maxBodyBytes ?? 4 * 1024 * 1024 }));

  for (const route of memoryRoutes) registerMemoryRoute(app, route, options.service);
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

/** Every `/v1` request: its API key resolved to a tenant (401 without), then the tenant's rate (429 over it). */
function authenticate(
  resolve: ApiKeyResolver,
  limiter: ReturnType<typeof createRateLimiter> | undefined,
  inFlight: Places,
): MiddlewareHandler<{ Variables: Variables }> {
  return async (context, next) => {
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
    if (!carriesBody(context.req.method)) return next();
    const giveBack = inFlight.take(tenantId);
    if (giveBack === undefined) {
      const error = new MemoryError(
        "rate_limited",
        `This tenant has ${inFlight.max} requests with a body in flight already; retry in 1 s`,
        429,
        { data: { retryAfterSeconds: 1, inFlight: inFlight.held(tenantId) } },
      );
      return context.json(errorBody(error), 429, { "retry-after": "1" });
    }
    try {
      await next();
    } finally {
      giveBack();
    }
  };
}

const carriesBody = (method: string) => method !== "GET" && method !== "HEAD" && method !== "OPTIONS";
