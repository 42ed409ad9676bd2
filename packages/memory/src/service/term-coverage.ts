/**
 * Coverage of the question's words: each text match scaled by the square root of the share of the
 * question's words it holds (Lucene's classic coordination factor, softened). BM25 sums its terms, so
 * a turn repeating one common word of the question ("the house", "the house") can outscore the one
 * turn that holds three of its words once; coverage breaks that tie towards the turn that answers
 * (ADR 0528).
 */
import type { StoredMemory } from "../store/memory-store.ts";
import { cachedIndexTokens, termTest } from "../text/index-tokens.ts";
import type { Scored } from "./conversation-retrieval.ts";
import { byScore } from "./rank-memories.ts";

/** The power the share of the question's words is raised to (chosen on the long dev set: 0.3–0.7 alike). */
export const coverageExponent = 0.5;

type Match = NonNullable<ReturnType<typeof termTest>>;

/** The tests of a query's distinct terms that can match a word, as the store's BM25 matches them. */
function matchesOf(terms: readonly string[]): Match[] {
  return [...new Set(terms)].flatMap((term) => termTest(term) ?? []);
}

/** The share (0..1) of `terms` a memory holds, counted as the store's BM25 matches them. */
export function termCoverage(memory: StoredMemory, terms: readonly string[]): number {
  return coverageOf(memory, matchesOf(terms));
}

function coverageOf(memory: StoredMemory, matches: readonly Match[]): number {
  if (matches.length === 0) return 0;
  return heldCount(memory, matches) / matches.length;
}

function heldCount(memory: StoredMemory, matches: readonly Match[]): number {
  // SQLite's scope BM25 tokenized this text a moment before; the cache of texts is bounded.
  const tokens = cachedIndexTokens(memory.content);
  let held = 0;
  for (const match of matches) if (tokens.some(match)) held += 1;
  return held;
}

/**
 * The hits, each scaled by its coverage of `terms` to the power `exponent`. A hit that says how many
 * of the terms it holds (`held`, as the in-process search counts them) is not tokenized again. A hit
 * that holds none of them (found another way) keeps the factor of one word, so it is not dropped.
 */
export function scaleByCoverage(
  hits: readonly (Scored & { readonly held?: number })[],
  terms: readonly string[],
  exponent = coverageExponent,
): Scored[] {
  const matches = matchesOf(terms);
  if (matches.length < 2) return hits.map(({ memory, score }) => ({ memory, score }));
  return hits
    .map(({ memory, score, held }) => {
      const share = Math.max(1, held ?? heldCount(memory, matches)) / matches.length;
      return { memory, score: score * share ** exponent };
    })
    .sort(byScore);
}
