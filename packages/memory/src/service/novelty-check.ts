/** The novelty check: the stored memory nearest a text, and whether it is the same fact. */
import { MEMORY_KINDS } from "../schemas/memory.ts";
import type { MemoryScope } from "../scope/memory-scope.ts";
import type { StoredMemory } from "../store/memory-store.ts";
import { cosine } from "./embedder.ts";
import { duplicateCosine, duplicateSimilarity, type ServiceContext } from "./service-context.ts";
import { queryTerms, textSimilarity } from "./text.ts";

export type NoveltyCheck = ReturnType<typeof createNoveltyCheck>;

/**
 * What a fact, a preference or a procedure is checked against: not the episodes, which are turns as
 * said (a fact mined from "I live in Lisbon" is not a repeat of the turn it came from, ADR 0361).
 */
const distilledKinds = MEMORY_KINDS.filter((kind) => kind !== "episode");

export function createNoveltyCheck({ store }: ServiceContext) {
  async function findDuplicate(
    tenantId: string,
    scope: MemoryScope,
    content: string,
    embedding: Float32Array | undefined,
    kind: (typeof MEMORY_KINDS)[number] = "fact",
  ): Promise<{ memory: StoredMemory; similarity: number } | undefined> {
    const terms = queryTerms(content);
    // Word overlap (Jaccard) at or above 0.9 leaves room for no missing word below ten words: the
    // duplicate holds every word, so the index is asked for those alone.
    const every = !embedding && Math.floor(terms.length * (1 - duplicateSimilarity) + 1e-9) === 0;
    const nearest = await nearestMemory(
      tenantId,
      scope,
      content,
      embedding,
      every,
      kind === "episode" ? undefined : distilledKinds,
    );
    if (!nearest) return undefined;
    const threshold = nearest.byVector ? duplicateCosine : duplicateSimilarity;
    return nearest.similarity >= threshold ? nearest : undefined;
  }

  async function nearestMemory(
    tenantId: string,
    scope: MemoryScope,
    content: string,
    embedding: Float32Array | undefined,
    every = false,
    kinds?: readonly (typeof MEMORY_KINDS)[number][],
  ): Promise<{ memory: StoredMemory; similarity: number; byVector: boolean } | undefined> {
    const candidates = await store.searchMemories(tenantId, scope, queryTerms(content), {
      limit: 10,
      every,
      order: "candidates",
      ...(kinds ? { kinds } : {}),
    });
    let best: { memory: StoredMemory; similarity: number; byVector: boolean } | undefined;
    for (const { memory } of candidates) {
      const similarity = textSimilarity(content, memory.content);
      if (!best || similarity > best.similarity) best = { memory, similarity, byVector: false };
    }
    if (embedding && (!best || best.similarity < duplicateSimilarity)) {
      for (const memory of await store.embeddedMemories(tenantId, scope, kinds)) {
        const similarity = cosine(embedding, memory.embedding!);
        if (similarity >= duplicateCosine && (!best || similarity > best.similarity)) {
          best = { memory, similarity, byVector: true };
        }
      }
    }
    return best;
  }

  return { findDuplicate, nearestMemory };
}
