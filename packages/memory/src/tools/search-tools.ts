/** `searchTools`: memory search, knowledge-base search and conversation recall. */
import { defineTool } from "@tackle/core";
import { recallConversationRequestSchema } from "../schemas/event.ts";
import { searchKnowledgeRequestSchema } from "../schemas/knowledge.ts";
import { searchRequestSchema } from "../schemas/memory.ts";
import { bindIdentity } from "./bind-identity.ts";
import type { MemoryToolClient } from "./memory-tool-client.ts";

const reads = { readOnlyHint: true, idempotentHint: true, openWorldHint: false } as const;

export function searchTools(client: MemoryToolClient) {
  return [
    defineTool({
      name: "memory_search",
      description:
        "Search long-term memories (facts, preferences, episodes, procedures) by meaning and keywords. Scope fields narrow the search: all given must match.",
      input: searchRequestSchema,
      annotations: { title: "Search memories", ...reads },
      execute: (input, context) => client.search(bindIdentity(input, context), { signal: context.signal }),
    }),
    defineTool({
      name: "memory_search_kb",
      description:
        "Search the knowledge base: chunks of documents ingested into memory, ranked by relevance.",
      input: searchKnowledgeRequestSchema,
      annotations: { title: "Search knowledge base", ...reads },
      execute: (input, context) =>
        client.searchKnowledge(bindIdentity(input, context), { signal: context.signal }),
    }),
    defineTool({
      name: "memory_recall_conversation",
      description:
        "Read back a session's conversation turns, newest first by default; pass nextCursor as cursor to page on.",
      input: recallConversationRequestSchema,
      annotations: { title: "Recall conversation", ...reads },
      execute: (input, context) =>
        client.recallConversation(bindIdentity(input, context), { signal: context.signal }),
    }),
  ];
}
