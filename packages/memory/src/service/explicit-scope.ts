/**
 * Reads that search or synthesize name their scope or ask for the whole tenant with `wholeTenant:
 * true`; a request with neither, or with both, is refused, so a forgotten `userId` never widens a read
 * to every user of the tenant (ADR 0366).
 */
import { MemoryError } from "../errors/memory-error.ts";
import { MEMORY_SCOPE_VALUES, pickScope } from "../scope/memory-scope.ts";

/** Throws `invalid_input` unless `request` names a scope field or `wholeTenant: true`, not both. */
export function checkExplicitScope(operation: string, request: unknown): void {
  const given = typeof request === "object" && request !== null ? request : {};
  const named = Object.keys(pickScope(given)).length > 0;
  const flag = (given as { wholeTenant?: unknown }).wholeTenant;
  // A query string says "true" (GET /v1/memories).
  const wholeTenant = flag === true || flag === "true";
  if (named && wholeTenant) {
    throw new MemoryError(
      "invalid_input",
      `${operation}: wholeTenant reads every scope; send it without userId, agentId and sessionId`,
      400,
      { data: { issues: [{ path: ["wholeTenant"], message: "not allowed beside a scope field" }] } },
    );
  }
  if (!named && !wholeTenant) {
    throw new MemoryError(
      "invalid_input",
      `${operation}: name the scope to read (${MEMORY_SCOPE_VALUES.join(", ")}), or send wholeTenant: true to read every scope of the tenant`,
      400,
      { data: { issues: [{ path: ["userId"], message: "a scope field or wholeTenant: true is required" }] } },
    );
  }
}

/** `operation`, refusing a request whose scope is implied rather than named. */
export function withExplicitScope<Request, Answer>(
  name: string,
  operation: (tenantId: string, request: Request) => Promise<Answer>,
): (tenantId: string, request: Request) => Promise<Answer> {
  return async (tenantId, request) => {
    checkExplicitScope(name, request);
    return operation(tenantId, request);
  };
}
