/** `searchTools`: memory search and listing, knowledge-base search and conversation recall. */
import { defineTool } from "@tackle/core";
import { z } from "zod";
import { idSchema } from "../schemas/common.ts";
import { recallConversationRequestSchema } from "../schemas/event.ts";
import { searchKnowledgeRequestSchema } from "../schemas/knowledge.ts";
import { listMemoriesQuerySchema, searchRequestSchema } from "../schemas/memory.ts";
import { bindIdentity } from "./bind-identity.ts";
import { compactChunk, compactEvent, compactMemory, withinBudget } from "./compact-results.ts";
import type { MemoryToolClient } from "./memory-tool-client.ts";
import { modelSchema } from "./model-schema.ts";

const reads = { readOnlyHint: true, idempotentHint: true, openWorldHint: false } as const;

/** `details` and `cursor`, added to the read tools' inputs. */
const details = z.boolean().optional().describe("Whole records");
const cursor = z.string().regex(/^\d+$/).optional().describe("A previous answer's nextCursor");
const maximumResults = 100;
/** `memory_list`'s cursor: a memory id, the last of the previous page. */
const listCursor = idSchema.optional().describe("A previous answer's nextCursor");
/** Shown to models in few words: the definitions' token budget is shared by 27 tools. */
const wholeTenant = z.boolean().optional().describe("All scopes");

/** `results`, or the part that fits the budget plus how many more and the cursor to read them. */
function paged<T>(items: readonly T[], offset: number) {
  const { kept, rest } = withinBudget(items);
  return {
    results: kept,
    ...(rest > 0
      ? { more: { omitted: rest, nextCursor: String(offset + kept.length), note: "over the token budget" } }
      : {}),
  };
}

export function searchTools(client: MemoryToolClient) {
  return [
    defineTool({
      name: "memory_search",
      description: "Search memories by keywords and meaning; every scope field given must match.",
      input: modelSchema(searchRequestSchema.extend({ wholeTenant, details, cursor })),
      annotations: { title: "Search memories", ...reads },
      execute: async ({ details: full, cursor: from, ...input }, context) => {
        const offset = Number(from ?? 0);
        const limit = input.limit ?? 10;
        const answer = await client.search(
          bindIdentity({ ...input, limit: Math.min(maximumResults, offset + limit) }, context),
          { signal: context.signal },
        );
        const hits = answer.results.slice(offset, offset + limit);
        const items = full ? hits : hits.map((hit) => compactMemory(hit.memory, hit.score));
        return { traceId: answer.traceId, ...paged<unknown>(items, offset) };
      },
    }),
    defineTool({
      name: "memory_list",
      description: "List memories, latest first; nextCursor as cursor reads on.",
      input: modelSchema(listMemoriesQuerySchema.extend({ wholeTenant, details, cursor: listCursor })),
      annotations: { title: "List memories", ...reads },
      execute: async ({ details: full, ...input }, context) => {
        const answer = await client.listMemories(bindIdentity(input, context), { signal: context.signal });
        const { kept, rest } = withinBudget<unknown>(
          full ? answer.memories : answer.memories.map((m) => compactMemory(m)),
        );
        // Past the budget the cursor continues after the last memory answered.
        const last = answer.memories[kept.length - 1];
        const nextCursor = rest > 0 && last ? last.id : answer.nextCursor;
        return {
          memories: kept,
          ...(nextCursor === undefined ? {} : { nextCursor }),
          ...(rest > 0 ? { more: { omitted: rest, note: "over the token budget" } } : {}),
        };
      },
    }),
    defineTool({
      name: "memory_search_kb",
      description: "Search the knowledge base: chunks of ingested documents, by relevance.",
      input: modelSchema(searchKnowledgeRequestSchema.extend({ wholeTenant, details, cursor })),
      annotations: { title: "Search knowledge base", ...reads },
      execute: async ({ details: full, cursor: from, ...input }, context) => {
        const offset = Number(from ?? 0);
        const limit = input.limit ?? 5;
        const answer = await client.searchKnowledge(
          bindIdentity({ ...input, limit: Math.min(50, offset + limit) }, context),
          { signal: context.signal },
        );
        const hits = answer.results.slice(offset, offset + limit);
        return { traceId: answer.traceId, ...paged<unknown>(full ? hits : hits.map(compactChunk), offset) };
      },
    }),
    defineTool({
      name: "memory_recall_conversation",
      description: "Read back a session's turns, newest first by default; nextCursor as cursor reads on.",
      input: modelSchema(recallConversationRequestSchema.extend({ details })),
      annotations: { title: "Recall conversation", ...reads },
      execute: async ({ details: full, ...input }, context) => {
        const answer = await client.recallConversation(bindIdentity(input, context), {
          signal: context.signal,
        });
        const { kept, rest } = withinBudget<unknown>(full ? answer.events : answer.events.map(compactEvent));
        // Past the budget the cursor continues after the last event answered.
        const last = answer.events[kept.length - 1];
        const nextCursor = rest > 0 && last ? last.id : answer.nextCursor;
        return {
          events: kept,
          ...(nextCursor === undefined ? {} : { nextCursor }),
          ...(rest > 0 ? { more: { omitted: rest, note: "over the token budget" } } : {}),
        };
      },
    }),
  ];
}
