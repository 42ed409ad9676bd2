/**
 * The ranked search every read path shares: the store's BM25 over the scope, then the
 * features bench/memory's ablation keeps on its long, hand-written held-out sets (ADRs 0367, 0521,
 * 0522, 0527, 0530): neighbouring turns and answer types. They can be switched off there.
 */
import type { Memory } from "../schemas/memory.ts";
import { type MemoryScope, scopeContains } from "../scope/memory-scope.ts";
import { liftByAnswerType } from "./answer-type.ts";
import { neighbourReach, spreadToNeighbours } from "./conversation-retrieval.ts";
import { cosine } from "./embedder.ts";
import { byScore, fuseWithVectors, rankMemories } from "./rank-memories.ts";
import {
  createScopeSnapshots,
  searchSnapshot,
  snapshotMemories,
  snapshotNeighbours,
} from "./scope-snapshot.ts";
import type { ServiceContext } from "./service-context.ts";
import { queryTerms } from "./text.ts";

/**
 * The retrieval features. Only bench/memory's ablation switches them
 * (`createSearchRanked(context, { neighbours: false })`); the service runs `shippedRetrievalFeatures`.
 */
export interface RetrievalFeatures {
  /** Turns next to a hit share its score (a reply found through its question). */
  readonly neighbours: boolean;
  /** Hits that say a time (or a number) gain when the question asks when (or how many) (ADR 0527). */
  readonly answerTypes: boolean;
}

/** What the service runs: every feature the ablation keeps. */
export const shippedRetrievalFeatures: RetrievalFeatures = {
  neighbours: true,
  answerTypes: true,
};

/**
 * With an embedder, its best matches that no word found join the candidates (a reply wording the
 * question's idea in other words); ten, since more let a weak embedder's near-misses crowd the text
 * matches' neighbours out (dev halves, hashing test embedder).
 */
const vectorOnlyCandidates = 10;

/**
 * The best hits whose neighbouring turns share their score: 40, since the words of a question often
 * sit two turns before its answer, below many turns sharing one common word.
 */
const neighbourAnchors = 40;

export type SearchRanked = ReturnType<typeof createSearchRanked>;

/** The ranked memories for a query in a scope (the search every read path shares). */
export function createSearchRanked(
  { store, clock, embedder, vectorWeight }: ServiceContext,
  switches: Partial<RetrievalFeatures> = {},
) {
  const features: RetrievalFeatures = { ...shippedRetrievalFeatures, ...switches };
  const snapshots = createScopeSnapshots(store);
  return async function searchRanked(
    tenantId: string,
    scope: MemoryScope,
    query: string,
    limit: number,
    kinds: readonly Memory["kind"][] | undefined,
  ) {
    const candidateLimit = Math.max(50, limit * 5);
    const terms = queryTerms(query);
    const kindFilter = kinds ? { kinds } : {};
    // The scope's memories in process while unchanged (ADR 0369); the store searches a larger one.
    const snapshot = await snapshots.get(tenantId, scope);
    const found = snapshot
      ? searchSnapshot(snapshot, terms, { limit: candidateLimit, ...kindFilter })
      : await store.searchMemories(tenantId, scope, terms, { limit: candidateLimit, ...kindFilter });
    let vectors: Map<string, number> | undefined;
    let candidates = [...found];
    if (embedder) {
      const queryVector = (await embedder.embed([query]))[0]!;
      // The scope kept in process holds its memories' embeddings as stored (ADR 0369).
      const embedded = snapshot
        ? snapshotMemories(snapshot).filter(
            (memory) => memory.embedding !== undefined && (!kinds || kinds.includes(memory.kind)),
          )
        : await store.embeddedMemories(tenantId, scope, kinds);
      const similar = embedded
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
    let lexical = candidates.sort(byScore);
    if (features.neighbours && lexical.length > 0) {
      const anchors = lexical.slice(0, Math.max(neighbourAnchors, limit));
      const ids = anchors.map((hit) => hit.memory.id);
      const neighbours = snapshot
        ? snapshotNeighbours(snapshot, ids, neighbourReach)
        : await store.neighbourMemories(tenantId, ids, neighbourReach);
      const inScope = new Map(
        [...neighbours].map(([id, list]) => [id, list.filter(({ memory }) => scopeContains(scope, memory))]),
      );
      lexical = spreadToNeighbours(lexical, inScope);
    }
    if (features.answerTypes) lexical = liftByAnswerType(lexical, query);
    const ranked = rankMemories(lexical, vectors, clock().getTime()).slice(0, limit);
    if (!snapshot || ranked.length === 0) return ranked;
    // The answer carries the memories as stored now: access counts move without a new generation.
    const current = new Map(
      (
        await store.getMemories(
          tenantId,
          ranked.map((hit) => hit.memory.id),
        )
      ).map((memory) => [memory.id, memory]),
    );
    return ranked.flatMap((hit) => {
      const memory = current.get(hit.memory.id);
      return memory ? [{ ...hit, memory }] : [];
    });
  };
}
