/** Retrieval: ranked memory search, conversation recall, knowledge-base search; each search is a stored trace. */
import { MemoryError } from "../errors/memory-error.ts";
import { recallConversationRequestSchema } from "../schemas/event.ts";
import { searchKnowledgeRequestSchema } from "../schemas/knowledge.ts";
import { type Memory, searchRequestSchema } from "../schemas/memory.ts";
import { type MemoryScope, pickScope, scopeContains } from "../scope/memory-scope.ts";
import type { StoredMemory } from "../store/memory-store.ts";
import { cachedIndexTokens, termTest } from "../text/index-tokens.ts";
import {
  askedNames,
  contextTurns,
  diversify,
  liftBySpecificity,
  liftByTimeAndSpeaker,
  mergeSecondPass,
  namesIn,
  newNames,
  scaleByContextCoverage,
  speakerOf,
  spreadToNeighbours,
  timeWindow,
} from "./conversation-retrieval.ts";
import { cosine } from "./embedder.ts";
import type { MemoryService } from "./memory-service.ts";
import { parseRequest } from "./parse-request.ts";
import { byScore, fuseWithVectors, rankMemories } from "./rank-memories.ts";
import { relatedWords } from "./related-words.ts";
import { publicEvent, publicMemory, type ServiceContext } from "./service-context.ts";
import { queryTerms, searchTerms } from "./text.ts";

/** How far a turn's specificity lifts it (up to ×3 for the most specific hit); set on the dev halves. */
const specificityWeight = 2;

/**
 * With an embedder, its best matches that no word found join the candidates (a reply wording the
 * question's idea in other words); ten, since more let a weak embedder's near-misses crowd the text
 * matches' neighbours out (dev halves, hashing test embedder).
 */
const vectorOnlyCandidates = 10;

/**
 * The query with related words asked again: its best hit holding a related word scores as much as the
 * best direct match (a synonym answers as well as the word; 0.5 and 0.7 kept "job" below "works" on
 * the dev halves).
 */
const relatedWeight = 1;

export type RetrievalOperations = Pick<MemoryService, "search" | "recallConversation" | "searchKnowledge">;
export type SearchRanked = ReturnType<typeof createSearchRanked>;

/** The ranked memories for a query in a scope (the search every read path shares). */
export function createSearchRanked({ store, clock, embedder, vectorWeight }: ServiceContext) {
  return async function searchRanked(
    tenantId: string,
    scope: MemoryScope,
    query: string,
    limit: number,
    kinds: readonly Memory["kind"][] | undefined,
  ) {
    const window = timeWindow(query, clock());
    // A question naming a time may match the turn it asks about by the time alone: widen the pool.
    const candidateLimit = window ? 1000 : Math.max(50, limit * 5);
    const terms = searchTerms(query);
    let found = await store.searchMemories(tenantId, scope, terms, {
      limit: candidateLimit,
      ...(kinds ? { kinds } : {}),
    });
    // Related words: "Where does Maya work?" also asks for "job", "office", "boss"; turns holding one
    // join the candidates, scaled below the question's own words, and cover the word they stand for.
    const alternatives = new Map<string, readonly string[]>();
    for (const word of queryTerms(query)) {
      const related = relatedWords(word);
      if (related.length > 0) alternatives.set(searchTerms(word)[0]!, searchTerms(related.join(" ")));
    }
    if (alternatives.size > 0) {
      const relatedTerms = [...new Set([...alternatives.values()].flat())];
      const extra = await store.searchMemories(tenantId, scope, [...terms, ...relatedTerms].slice(0, 32), {
        limit: candidateLimit,
        ...(kinds ? { kinds } : {}),
      });
      const relatedTests = relatedTerms.flatMap((term) => termTest(term) ?? []);
      const holding = extra.filter((hit) =>
        cachedIndexTokens(hit.memory.content).some((token) => relatedTests.some((test) => test(token))),
      );
      found = found.length === 0 ? holding : mergeSecondPass(found, holding, relatedWeight);
    }
    let vectors: Map<string, number> | undefined;
    // Specificity is read from the text matches alone, before any vector-only candidate joins them.
    let candidates = liftBySpecificity(found, specificityWeight);
    if (embedder) {
      const queryVector = (await embedder.embed([query]))[0]!;
      const similar = (await store.embeddedMemories(tenantId, scope, kinds))
        .map((memory) => ({ memory, score: cosine(queryVector, memory.embedding!) }))
        .filter((hit) => hit.score > 0)
        .sort(byScore);
      vectors = new Map(similar.map((hit) => [hit.memory.id, hit.score]));
      const lexicalIds = new Set(found.map((hit) => hit.memory.id));
      // Every text match with its similarity, and the embedder's best matches that no word found when
      // the embedder rates them as close as the best text match: a weak embedder's near-misses stay out.
      const bar = vectors.get(candidates[0]?.memory.id ?? "") ?? 0;
      const semantic = similar.filter(
        (hit, index) => lexicalIds.has(hit.memory.id) || (index < vectorOnlyCandidates && hit.score >= bar),
      );
      candidates = fuseWithVectors(candidates, semantic, vectorWeight);
    }
    let lexical = liftByTimeAndSpeaker(candidates, query, window).sort(byScore);
    // Multi-hop: names in the first hits that the question lacks seed a second pass, asking for them
    // and the question's words the first hit did not hold ("Maya's sister" → "My sister Lena …" →
    // "Lena" and "instrument play" → "Lena played her violin").
    const speakers = new Set(found.flatMap((hit) => speakerOf(hit.memory) ?? []));
    const known = namesIn(found.map((hit) => hit.memory.content));
    for (const speaker of speakers) known.delete(speaker);
    const top = lexical[0]?.score ?? 0;
    const passes = lexical.slice(0, 3).flatMap((hit) => {
      const seeds = newNames(hit.memory.content, query, known).filter((name) => !speakers.has(name));
      return seeds.length > 0 && top > 0 ? [{ hit, seeds }] : [];
    });
    const chains = new Map<string, StoredMemory>();
    for (const { hit, seeds } of passes) {
      const held = new Set(cachedIndexTokens(hit.memory.content));
      const rest = terms.filter((term) => {
        const test = termTest(term);
        return test !== undefined && ![...held].some(test);
      });
      if (rest.length === 0) continue;
      const second = await store.searchMemories(
        tenantId,
        scope,
        searchTerms(`${seeds.join(" ")} ${rest.join(" ")}`),
        {
          limit: Math.max(20, limit * 2),
          ...(kinds ? { kinds } : {}),
        },
      );
      // A second hop holds a seed and one of the question's words the first hop lacked.
      const required = new Set(seeds.map((seed) => seed.toLowerCase()));
      const restTests = rest.flatMap((term) => termTest(term) ?? []);
      const withSeed = second.filter((other) => {
        if (other.memory.id === hit.memory.id) return false;
        const words = other.memory.content.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
        if (!words.some((word) => required.has(word))) return false;
        const tokens = cachedIndexTokens(other.memory.content);
        return restTests.some((test) => tokens.some(test));
      });
      // A hop covers the question together with the turn it came from ("Lena" + "my sister").
      for (const other of withSeed) if (!chains.has(other.memory.id)) chains.set(other.memory.id, hit.memory);
      lexical = mergeSecondPass(
        lexical,
        liftByTimeAndSpeaker(withSeed, query, window),
        0.8 * (hit.score / top),
      );
    }
    // Neighbouring turns of the best hits share their score; 40 anchors, since the words of a question
    // often sit two turns before its answer, below many turns sharing one common word.
    const anchors = lexical.slice(0, Math.max(40, limit));
    const neighbours = await store.neighbourMemories(
      tenantId,
      anchors.map((hit) => hit.memory.id),
      2,
    );
    const inScope = new Map(
      [...neighbours].map(([id, list]) => [id, list.filter(({ memory }) => scopeContains(scope, memory))]),
    );
    lexical = spreadToNeighbours(lexical, inScope, undefined, undefined, askedNames(query));
    lexical = scaleByContextCoverage(
      lexical,
      contextTurns(
        anchors.map((hit) => hit.memory),
        inScope,
      ),
      terms,
      alternatives,
      chains,
    );
    return diversify(rankMemories(lexical, vectors, clock().getTime()), limit).slice(0, limit);
  };
}

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
