/**
 * The ranked search every read path shares: the store's BM25 over the scope, then the conversation
 * features that bench/memory's ablation kept (each can be switched off there, ADR 0360).
 */
import type { Memory } from "../schemas/memory.ts";
import { type MemoryScope, scopeContains } from "../scope/memory-scope.ts";
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
import { byScore, fuseWithVectors, rankMemories } from "./rank-memories.ts";
import { relatedWords } from "./related-words.ts";
import type { ServiceContext } from "./service-context.ts";
import { queryTerms, searchTerms } from "./text.ts";

/**
 * The retrieval features, each on unless switched off. Only bench/memory's ablation switches them
 * (`createSearchRanked(context, { secondHop: false })`); the service runs them all.
 */
export interface RetrievalFeatures {
  /** Words cut to a five-letter root prefix ("allergy" → "aller*"); off: the words as written. */
  readonly prefixTerms: boolean;
  /** The hand-written related-words table ("work" also asks "job"). */
  readonly relatedWords: boolean;
  /** A turn saying something specific is lifted (small talk repeats its words). */
  readonly specificity: boolean;
  /** "in May 2023", "last week": turns inside the window are lifted, the pool widened. */
  readonly timeWindow: boolean;
  /** A turn by the speaker a question names is lifted, and "Maya's sister" meets "my sister". */
  readonly speakers: boolean;
  /** Names in the first hits seed a second search (multi-hop). */
  readonly secondHop: boolean;
  /** A capitalised word opening a sentence counts as a name for the second hop (commit 9166b3d). */
  readonly sentenceOpeners: boolean;
  /** Turns next to a hit share its score (a reply found through its question). */
  readonly neighbours: boolean;
  /** A turn is scaled by the share of the question its context covers. */
  readonly contextCoverage: boolean;
  /** A near-copy of a better result is moved down. */
  readonly diversify: boolean;
}

export const allRetrievalFeatures: RetrievalFeatures = {
  prefixTerms: true,
  relatedWords: true,
  specificity: true,
  timeWindow: true,
  speakers: true,
  secondHop: true,
  sentenceOpeners: true,
  neighbours: true,
  contextCoverage: true,
  diversify: true,
};

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

export type SearchRanked = ReturnType<typeof createSearchRanked>;

/** The ranked memories for a query in a scope (the search every read path shares). */
export function createSearchRanked(
  { store, clock, embedder, vectorWeight }: ServiceContext,
  switches: Partial<RetrievalFeatures> = {},
) {
  const features: RetrievalFeatures = { ...allRetrievalFeatures, ...switches };
  const termsOf = (text: string) => (features.prefixTerms ? searchTerms(text) : queryTerms(text));
  return async function searchRanked(
    tenantId: string,
    scope: MemoryScope,
    query: string,
    limit: number,
    kinds: readonly Memory["kind"][] | undefined,
  ) {
    const window = features.timeWindow ? timeWindow(query, clock()) : undefined;
    // A question naming a time may match the turn it asks about by the time alone: widen the pool.
    const candidateLimit = window ? 1000 : Math.max(50, limit * 5);
    const terms = termsOf(query);
    let found = await store.searchMemories(tenantId, scope, terms, {
      limit: candidateLimit,
      ...(kinds ? { kinds } : {}),
    });
    // Related words: "Where does Maya work?" also asks for "job", "office", "boss"; turns holding one
    // join the candidates, scaled below the question's own words, and cover the word they stand for.
    const alternatives = new Map<string, readonly string[]>();
    if (features.relatedWords) {
      for (const word of queryTerms(query)) {
        const related = relatedWords(word);
        if (related.length > 0) alternatives.set(termsOf(word)[0]!, termsOf(related.join(" ")));
      }
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
    let candidates = features.specificity ? liftBySpecificity(found, specificityWeight) : [...found];
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
    const lift = (hits: readonly { memory: StoredMemory; score: number }[]) =>
      features.speakers || window ? liftByTimeAndSpeaker(hits, query, window, features.speakers) : [...hits];
    let lexical = lift(candidates).sort(byScore);
    const chains = new Map<string, StoredMemory>();
    if (features.secondHop) {
      lexical = await secondHop(lexical, found, chains);
    }
    const anchors = lexical.slice(0, Math.max(40, limit));
    let context = new Map<string, Map<number, StoredMemory>>();
    if (features.neighbours || features.contextCoverage) {
      // Neighbouring turns of the best hits share their score; 40 anchors, since the words of a question
      // often sit two turns before its answer, below many turns sharing one common word.
      const neighbours = await store.neighbourMemories(
        tenantId,
        anchors.map((hit) => hit.memory.id),
        2,
      );
      const inScope = new Map(
        [...neighbours].map(([id, list]) => [id, list.filter(({ memory }) => scopeContains(scope, memory))]),
      );
      if (features.neighbours) {
        lexical = spreadToNeighbours(
          lexical,
          inScope,
          undefined,
          undefined,
          features.speakers ? askedNames(query) : undefined,
        );
      }
      context = contextTurns(
        anchors.map((hit) => hit.memory),
        inScope,
      );
    }
    if (features.contextCoverage) {
      lexical = scaleByContextCoverage(lexical, context, terms, alternatives, chains);
    }
    const ranked = rankMemories(lexical, vectors, clock().getTime());
    return (features.diversify ? diversify(ranked, limit) : ranked).slice(0, limit);

    /**
     * Multi-hop: names in the first hits that the question lacks seed a second pass, asking for them
     * and the question's words the first hit did not hold ("Maya's sister" → "My sister Lena …" →
     * "Lena" and "instrument play" → "Lena played her violin").
     */
    async function secondHop(
      first: { memory: StoredMemory; score: number }[],
      textHits: readonly { memory: StoredMemory; score: number }[],
      chained: Map<string, StoredMemory>,
    ) {
      let merged = first;
      const speakers = new Set(textHits.flatMap((hit) => speakerOf(hit.memory) ?? []));
      const known = namesIn(
        textHits.map((hit) => hit.memory.content),
        features.sentenceOpeners,
      );
      for (const speaker of speakers) known.delete(speaker);
      const top = merged[0]?.score ?? 0;
      const passes = merged.slice(0, 3).flatMap((hit) => {
        const seeds = newNames(hit.memory.content, query, known).filter((name) => !speakers.has(name));
        return seeds.length > 0 && top > 0 ? [{ hit, seeds }] : [];
      });
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
          termsOf(`${seeds.join(" ")} ${rest.join(" ")}`),
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
        for (const other of withSeed)
          if (!chained.has(other.memory.id)) chained.set(other.memory.id, hit.memory);
        merged = mergeSecondPass(merged, lift(withSeed), 0.8 * (hit.score / top));
      }
      return merged;
    }
  };
}
