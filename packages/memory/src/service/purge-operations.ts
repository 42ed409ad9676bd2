/** `purge`: hard deletion of a scope, refused for a request that names no one (ADR 0365). */
import { MemoryError } from "../errors/memory-error.ts";
import { purgeRequestSchema } from "../schemas/purge.ts";
import { MEMORY_SCOPE_VALUES, pickScope } from "../scope/memory-scope.ts";
import type { MemoryService } from "./memory-service.ts";
import { parseRequest } from "./parse-request.ts";
import type { ServiceContext } from "./service-context.ts";

export function createPurgeOperations(context: ServiceContext): Pick<MemoryService, "purge"> {
  const { store, nowIso, logger } = context;
  return {
    async purge(tenantId, request) {
      const scope = pickScope(parseRequest(purgeRequestSchema, request));
      if (Object.keys(scope).length === 0) {
        throw new MemoryError(
          "invalid_input",
          `purge deletes one scope: name at least one of ${MEMORY_SCOPE_VALUES.join(", ")} (a whole tenant is never purged by one request)`,
          400,
          { data: { issues: [{ path: ["userId"], message: "a scope field is required" }] } },
        );
      }
      const purged = await store.purgeScope(tenantId, scope);
      const purgedAt = nowIso();
      // Ids and counts only: the log must not keep what was purged.
      logger.info("memory: scope purged", { tenant: tenantId, ...scope, ...purged });
      return { scope, purged, purgedAt };
    },
  };
}
