/** `synthesisTools`: views built from the store — profile, context bundle, unified state. */
import { defineTool } from "@tackle/core";
import { z } from "zod";
import { contextBundleRequestSchema, scopeRequestSchema } from "../schemas/synthesis.ts";
import { bindIdentity } from "./bind-identity.ts";
import { compactEvent, compactMemory } from "./compact-results.ts";
import type { MemoryToolClient } from "./memory-tool-client.ts";
import { modelSchema } from "./model-schema.ts";

const reads = { readOnlyHint: true, idempotentHint: true, openWorldHint: false } as const;
const details = z.boolean().optional().describe("Whole records");

export function synthesisTools(client: MemoryToolClient) {
  return [
    defineTool({
      name: "memory_profile",
      description: "The scope's profile: a summary plus its preferences, facts and procedures.",
      input: modelSchema(scopeRequestSchema.omit({ wholeTenant: true }).extend({ details })),
      annotations: { title: "Profile", ...reads },
      execute: async ({ details: full, ...input }, context) => {
        const answer = await client.profile(bindIdentity(input, context), { signal: context.signal });
        if (full) return answer;
        // The summary already states every listed item.
        const { summary, memoryIds, generatedBy } = answer.profile;
        return { profile: { summary, memoryIds, generatedBy } };
      },
    }),
    defineTool({
      name: "memory_build_context_bundle",
      description:
        "What matters for a query within a token budget: profile, core memory, the most relevant memories, recent turns. No query: what matters on waking.",
      input: modelSchema(contextBundleRequestSchema.omit({ wholeTenant: true }).extend({ details })),
      annotations: { title: "Context bundle", ...reads },
      execute: async ({ details: full, ...input }, context) => {
        const answer = await client.contextBundle(bindIdentity(input, context), { signal: context.signal });
        if (full) return answer;
        const { summary, generatedBy } = answer.profile;
        return { ...answer, profile: { summary, generatedBy } };
      },
    }),
    defineTool({
      name: "memory_state_unified",
      description: "The scope's state: core memory, counts, recent memories and turns, active jobs.",
      input: modelSchema(scopeRequestSchema.omit({ wholeTenant: true })),
      annotations: { title: "Unified state", ...reads },
      execute: async (input, context) => {
        const state = await client.unifiedState(bindIdentity(input, context), { signal: context.signal });
        return {
          ...state,
          recentMemories: state.recentMemories.map((memory) => compactMemory(memory)),
          recentEvents: state.recentEvents.map(compactEvent),
        };
      },
    }),
  ];
}
