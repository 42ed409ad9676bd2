/** Retrieval: ranked memory search, conversation recall, knowledge-base search; each search is a stored trace. */
import { MemoryError } from "../errors/memory-error.ts";
import { recallConversationRequestSchema } from "../schemas/event.ts";
import { searchKnowledgeRequestSchema } from "../schemas/knowledge.ts";
import { searchRequestSchema } from "../schemas/memory.ts";
import { type MemoryScope, pickScope, scopeContains } from "../scope/memory-scope.ts";
import type { MemoryService } from "./memory-service.ts";
import { parseRequest } from "./parse-request.ts";
import type { SearchRanked } from "./search-ranked.ts";
import { publicEvent, publicMemory, type ServiceContext } from "./service-context.ts";
import { queryTerms } from "./text.ts";

export type RetrievalOperations = Pick<MemoryService, "search" | "recallConversation" | "searchKnowledge">;

export function createRetrievalOperations(
  context: ServiceContext,
  searchRanked: SearchRanked,
): RetrievalOperations {
  const { store, embedder, recordTrace } = context;
  /** Where a recall cursor continues: an event of the caller's own scope, or an older numeric cursor. */
  const cursorPosition = async (tenantId: string, scope: MemoryScope, cursor: string) => {
    if (/^\d{1,15}$/.test(cursor)) return Number(cursor);
    const [event] = await store.getEvents(tenantId, [cursor]);
    // Another identity's event id answers as an unknown one: a cursor reveals nothing of it.
    if (event === undefined || !scopeContains(scope, event)) {
      throw new MemoryError(
        "invalid_input",
        "cursor is the nextCursor of a previous page of this session",
        400,
      );
    }
    return event.seq;
  };
  return {
    async search(tenantId, request) {
      const started = performance.now();
      const input = parseRequest(searchRequestSchema, request);
      const scope = pickScope(input);
      const ranked = await searchRanked(tenantId, scope, input.query, input.limit, input.kinds);
      const traceId = await recordTrace(
        tenantId,
        scope,
        "search",
        input.query,
        ranked.map((item) => ({ id: item.memory.id, score: item.score, components: item.components })),
        started,
      );
      return {
        traceId,
        ranking: embedder ? "fused" : "bm25",
        results: ranked.map((item) => ({
          memory: publicMemory(item.memory),
          score: item.score,
          components: item.components,
        })),
      };
    },

    async recallConversation(tenantId, request) {
      const input = parseRequest(recallConversationRequestSchema, request);
      const scope = pickScope(input);
      const cursor =
        input.cursor === undefined ? undefined : await cursorPosition(tenantId, scope, input.cursor);
      const events = await store.listEvents(tenantId, scope, {
        order: input.order,
        limit: input.limit + 1,
        ...(cursor === undefined ? {} : { cursor }),
      });
      const page = events.slice(0, input.limit);
      const last = page.at(-1);
      return {
        events: page.map(publicEvent),
        // The last event's id, not its place in the store: that would count every tenant's events.
        ...(events.length > input.limit && last ? { nextCursor: last.id } : {}),
      };
    },

    async searchKnowledge(tenantId, request) {
      const started = performance.now();
      const input = parseRequest(searchKnowledgeRequestSchema, request);
      const scope = pickScope(input);
      const hits = await store.searchChunks(tenantId, scope, queryTerms(input.query), input.limit);
      const top = hits[0]?.score ?? 0;
      const results = hits.map((hit) => ({
        chunkId: hit.chunk.id,
        documentId: hit.document.id,
        title: hit.document.title,
        ...(hit.document.source ? { source: hit.document.source } : {}),
        ordinal: hit.chunk.ordinal,
        content: hit.chunk.content,
        score: Number((top > 0 ? hit.score / top : 0).toFixed(6)),
      }));
      const traceId = await recordTrace(
        tenantId,
        scope,
        "knowledge_search",
        input.query,
        results.map((result) => ({ id: result.chunkId, score: result.score })),
        started,
      );
      return { traceId, results };
    },
  };
}
