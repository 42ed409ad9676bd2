/**
 * Coverage of the question's words: each text match scaled by the square root of the share of the
 * question's words it holds (Lucene's classic coordination factor, softened). BM25 sums its terms, so
 * a turn repeating one common word of the question ("the house", "the house") can outscore the one
 * turn that holds three of its words once; coverage breaks that tie towards the turn that answers
 * (ADR 0528).
 */
import type { StoredMemory } from "../store/memory-store.ts";
import { indexTokens, termMatch } from "../text/index-tokens.ts";
import type { Scored } from "./conversation-retrieval.ts";
import { byScore } from "./rank-memories.ts";

/** The power the share of the question's words is raised to (chosen on the long dev set: 0.3–0.7 alike). */
export const coverageExponent = 0.5;

type Match = NonNullable<ReturnType<typeof termMatch>>;

/** A memory's indexed tokens as a set, kept per memory object (a scope kept in process reuses them). */
const tokenSets = new WeakMap<StoredMemory, ReadonlySet<string>>();

function tokenSetOf(memory: StoredMemory): ReadonlySet<string> {
  let tokens = tokenSets.get(memory);
  if (tokens === undefined) {
    tokens = new Set(indexTokens(memory.content));
    tokenSets.set(memory, tokens);
  }
  return tokens;
}

function holds(tokens: ReadonlySet<string>, { word, stemmed, prefix }: Match): boolean {
  if (!prefix) return tokens.has(stemmed);
  for (const token of tokens) if (token.startsWith(word) || token.startsWith(stemmed)) return true;
  return false;
}

/** The distinct terms of a query that can match a word, as the store's BM25 matches them. */
function matchesOf(terms: readonly string[]): Match[] {
  return [...new Set(terms)].flatMap((term) => termMatch(term) ?? []);
}

/** The share (0..1) of `terms` a memory holds, counted as the store's BM25 matches them. */
export function termCoverage(memory: StoredMemory, terms: readonly string[]): number {
  return coverageOf(memory, matchesOf(terms));
}

function coverageOf(memory: StoredMemory, matches: readonly Match[]): number {
  if (matches.length === 0) return 0;
  const tokens = tokenSetOf(memory);
  let held = 0;
  for (const match of matches) if (holds(tokens, match)) held += 1;
  return held / matches.length;
}

/**
 * The hits, each scaled by its coverage of `terms` to the power `exponent`. A hit that holds none of
 * them (found another way) keeps the factor of one word, so it is not dropped.
 */
export function scaleByCoverage(
  hits: readonly Scored[],
  terms: readonly string[],
  exponent = coverageExponent,
): Scored[] {
  const matches = matchesOf(terms);
  if (matches.length < 2) return [...hits];
  const floor = 1 / matches.length;
  return hits
    .map((hit) => ({
      memory: hit.memory,
      score: hit.score * Math.max(floor, coverageOf(hit.memory, matches)) ** exponent,
    }))
    .sort(byScore);
}
