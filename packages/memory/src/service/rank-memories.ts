/**
 * Ranking: BM25 alone, or BM25 and vector similarity fused as a weighted sum of each relative to its
 * best (the vector at a quarter of the text's weight); both nudged by
 * recency and feedback so a fresh, helpful memory wins a tie but never beats a clearly better match.
 */
import type { StoredMemory } from "../store/memory-store.ts";

export interface RankedMemory {
  readonly memory: StoredMemory;
  readonly score: number;
  readonly components: { bm25?: number; vector?: number; recency: number; feedback: number };
}

/** The vector's weight beside the text match's (1) in fused ranking; set on the dev halves. */
const vectorWeight = 0.25;
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

export function rankMemories(
  lexical: readonly { memory: StoredMemory; score: number }[],
  semantic: readonly { memory: StoredMemory; score: number }[] | undefined,
  now: number,
): RankedMemory[] {
  const byId = new Map<string, { memory: StoredMemory; bm25?: number; vector?: number; relevance: number }>();
  const topLexical = lexical[0]?.score ?? 0;
  lexical.forEach((hit) => {
    const bm25 = topLexical > 0 ? hit.score / topLexical : 0;
    byId.set(hit.memory.id, { memory: hit.memory, bm25, relevance: bm25 });
  });
  // Fusion adds the vector's similarity, relative to the best one, at `vectorWeight` of the text
  // match's weight: an embedder finds what the words miss without overruling a clear text match.
  const topVector = semantic?.[0]?.score ?? 0;
  semantic?.forEach((hit) => {
    const entry = byId.get(hit.memory.id) ?? { memory: hit.memory, relevance: 0 };
    entry.vector = hit.score;
    entry.relevance += topVector > 0 ? (vectorWeight * hit.score) / topVector : 0;
    byId.set(hit.memory.id, entry);
  });
  const scale = semantic ? 1 + vectorWeight : 1;
  const ranked: RankedMemory[] = [];
  for (const entry of byId.values()) {
    const recency = recencyScore(entry.memory, now);
    const feedback = feedbackScore(entry.memory);
    const importance = 0.75 + 0.25 * entry.memory.importance;
    const score =
      (entry.relevance / scale) * importance + recencyWeight * recency + feedbackWeight * feedback;
    ranked.push({
      memory: entry.memory,
      score: Number(score.toFixed(6)),
      components: {
        ...(entry.bm25 === undefined ? {} : { bm25: Number(entry.bm25.toFixed(6)) }),
        ...(entry.vector === undefined ? {} : { vector: Number(entry.vector.toFixed(6)) }),
        recency: Number(recency.toFixed(6)),
        feedback: Number(feedback.toFixed(6)),
      },
    });
  }
  return ranked.sort(byScore);
}
