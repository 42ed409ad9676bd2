/** `parseMemoryIdentity`: checks an identity a caller passed per request, before any call is made. */
import { formatIssues } from "@tackle/core/internal";
import { z } from "zod";
import { MEMORY_SCOPE_VALUES, scopeIdSchema } from "../scope/memory-scope.ts";
import type { MemoryIdentity } from "./memory-identity.ts";
import { MemoryMiddlewareError } from "./memory-middleware-error.ts";

export const memoryIdentitySchema = z.strictObject({
  userId: scopeIdSchema.optional(),
  agentId: scopeIdSchema.optional(),
  sessionId: scopeIdSchema.optional(),
  scope: z.array(z.enum(MEMORY_SCOPE_VALUES)).optional(),
  mode: z.enum(["full", "wake-up"]).optional(),
});

/** Undefined stays undefined; anything else must be a valid identity or the call is refused. */
export function parseMemoryIdentity(value: unknown, where: string): MemoryIdentity | undefined {
  if (value === undefined || value === null) return undefined;
  const parsed = memoryIdentitySchema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((issue) => ({
    path: issue.path.map(String),
    message: issue.message,
  }));
  throw new MemoryMiddlewareError(
    "memory_identity_invalid",
    `Invalid memory identity in ${where}: ${formatIssues(issues)}`,
    undefined,
    {
      issues,
    },
  );
}
