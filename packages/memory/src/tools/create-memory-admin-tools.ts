/**
 * `createMemoryAdminTools`: the operator's tools, kept out of `createMemoryTools` so an agent's tool
 * set never holds them by default. `memory_admin_purge` deletes a scope for good; it refuses a call
 * made for an identity (a serving layer acting for a user) and the service refuses a key bound to one.
 */
import { defineTool } from "@tackle/core";
import { MemoryError } from "../errors/memory-error.ts";
import { purgeRequestSchema } from "../schemas/purge.ts";
import { identityScope } from "./bind-identity.ts";
import type { MemoryToolClient } from "./memory-tool-client.ts";
import { modelSchema } from "./model-schema.ts";

export function createMemoryAdminTools(client: Pick<MemoryToolClient, "purge">) {
  return [
    defineTool({
      name: "memory_admin_purge",
      description:
        "Admin only. Delete everything of a scope for good (memories, history, events, documents, traces, jobs); cannot be undone.",
      input: modelSchema(purgeRequestSchema),
      annotations: {
        title: "Purge a scope",
        readOnlyHint: false,
        destructiveHint: true,
        openWorldHint: false,
      },
      execute: async (input, context) => {
        const acting = identityScope(context);
        if (acting !== undefined && Object.keys(acting).length > 0) {
          throw new MemoryError(
            "scope_forbidden",
            "memory_admin_purge is for operators; this call acts for an identity",
            403,
            { data: { identity: acting } },
          );
        }
        return client.purge(input, { ...(context.signal === undefined ? {} : { signal: context.signal }) });
      },
    }),
  ];
}
