/**
 * A bound API key (ADR 0357) acts only as its own identity: `boundScope` says which one, `confine`
 * holds a request to it.
 */
import { MemoryError } from "../errors/memory-error.ts";
import { type MemoryScope, pickScope } from "../scope/memory-scope.ts";
import { API_KEY_BINDING_FIELDS, type ApiKeyGrant } from "./api-keys.ts";
import type { MemoryRoute, MemoryRouteInput } from "./routes.ts";

/** The identity a bound key acts as; undefined for an unbound key. */
export function boundScope(grant: ApiKeyGrant): MemoryScope | undefined {
  const scope = pickScope(grant);
  return API_KEY_BINDING_FIELDS.some((field) => scope[field] !== undefined) ? scope : undefined;
}

function forbidden(message: string, data?: Record<string, unknown>): MemoryError {
  return new MemoryError("scope_forbidden", message, 403, data ? { data } : {});
}

function takesScope(schema: unknown): boolean {
  // A request of several shapes (the import's, one per format) takes the scope if each shape does.
  const options = (schema as { options?: unknown } | undefined)?.options;
  if (Array.isArray(options)) return options.length > 0 && options.every(takesScope);
  const shape = (schema as { shape?: Record<string, unknown> } | undefined)?.shape;
  return shape !== undefined && API_KEY_BINDING_FIELDS.every((field) => field in shape);
}

/**
 * A bound key's request, confined to its identity: every identity field the key fixes is filled in
 * where absent and refused where it names anyone else. A route that takes no identity fields and does
 * not read the key's scope itself is refused: a route added without a scope check fails closed.
 */
export function confine(route: MemoryRoute, input: MemoryRouteInput, bound: MemoryScope): MemoryRouteInput {
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
