/**
 * Ranking: BM25 alone, or BM25 and vector similarity fused as a weighted sum of each relative to its
 * best (the vector at `vectorWeight` of the text's weight); both nudged by
 * recency and feedback so a fresh, helpful memory wins a tie but never beats a clearly better match.
 */
import type { StoredMemory } from "../store/memory-store.ts";

export interface RankedMemory {
  readonly memory: StoredMemory;
  readonly score: number;
  readonly components: { bm25?: number; vector?: number; recency: number; feedback: number };
}

/**
 * Recency breaks ties between equally good text matches; 0.02 rather than 0.05 (measured on the dev
 * half of bench/memory's set) so it reorders ties without lifting a fresher, weaker match over a
 * clearly better one.
 */
const recencyWeight = 0.02;
const feedbackWeight = 0.1;
const recencyHalfLifeDays = 30;

/**
 * Best first, and the same order on every run: equal scores (common after rounding, or when only a
 * speaker or a time window matched) go to the later-written memory, then by id.
 */
export function byScore(
  left: { readonly memory: StoredMemory; readonly score: number },
  right: { readonly memory: StoredMemory; readonly score: number },
): number {
  return (
    right.score - left.score ||
    (right.memory.createdAt < left.memory.createdAt
      ? -1
      : right.memory.createdAt > left.memory.createdAt
        ? 1
        : 0) ||
    (left.memory.id < right.memory.id ? -1 : left.memory.id > right.memory.id ? 1 : 0)
  );
}

export function recencyScore(memory: StoredMemory, now: number): number {
  const ageDays = Math.max(0, now - Date.parse(memory.updatedAt)) / 86_400_000;
  return 0.5 ** (ageDays / recencyHalfLifeDays);
}

export function feedbackScore(memory: StoredMemory): number {
  const net =
    memory.feedback.helpful -
    memory.feedback.unhelpful +
    memory.outcomes.successes -
    memory.outcomes.failures;
  return Math.tanh(net / 3);
}

/**
 * Fusion, before the conversation features: each lexical hit's score relative to the best one, plus
 * the vector's similarity relative to the best one at `weight` of that; the embedder's best matches
 * join the candidates even when no word matched. Neighbouring turns, context coverage and the rest
 * then work on the fused score, so a turn the embedder found still lends its score to its reply.
 */
export function fuseWithVectors(
  lexical: readonly { memory: StoredMemory; score: number }[],
  semantic: readonly { memory: StoredMemory; score: number }[],
  weight: number,
): { memory: StoredMemory; score: number }[] {
  const topText = Math.max(0, ...lexical.map((hit) => hit.score));
  const topVector = semantic[0]?.score ?? 0;
  const fused = new Map(
    lexical.map((hit) => [
      hit.memory.id,
      { memory: hit.memory, score: topText > 0 ? hit.score / topText : 0 },
    ]),
  );
  if (topVector > 0) {
    for (const hit of semantic) {
      const entry = fused.get(hit.memory.id) ?? { memory: hit.memory, score: 0 };
      entry.score += (weight * hit.score) / topVector;
      fused.set(hit.memory.id, entry);
    }
  }
  return [...fused.values()].sort(byScore);
}

/**
 * The final order: relevance relative to the best hit (`bm25` in the components: the text match
 * after the conversation features, fused with vectors when an embedder is set), weighted by
 * importance, plus recency and feedback; `vectors` holds each memory's raw similarity, if any.
 */
export function rankMemories(
  hits: readonly { memory: StoredMemory; score: number }[],
  vectors: ReadonlyMap<string, number> | undefined,
  now: number,
): RankedMemory[] {
  const top = Math.max(0, ...hits.map((hit) => hit.score));
  const ranked: RankedMemory[] = [];
  for (const hit of hits) {
    const relevance = top > 0 ? hit.score / top : 0;
    const vector = vectors?.get(hit.memory.id);
    const recency = recencyScore(hit.memory, now);
    const feedback = feedbackScore(hit.memory);
    const importance = 0.75 + 0.25 * hit.memory.importance;
    const score = relevance * importance + recencyWeight * recency + feedbackWeight * feedback;
    ranked.push({
      memory: hit.memory,
      score: Number(score.toFixed(6)),
      components: {
        bm25: Number(relevance.toFixed(6)),
        ...(vector === undefined ? {} : { vector: Number(vector.toFixed(6)) }),
        recency: Number(recency.toFixed(6)),
        feedback: Number(feedback.toFixed(6)),
      },
    });
  }
  return ranked.sort(byScore);
}
