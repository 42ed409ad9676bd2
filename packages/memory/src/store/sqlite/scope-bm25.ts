/**
 * BM25 over one scope's statistics, for the SQLite store. FTS5's `bm25()` takes the document count,
 * the average length and each term's document frequency from the whole table, so one tenant's data
 * moved another's scores. Here the index only selects candidates; term frequencies are counted on
 * the candidates' text (tokenized as FTS5's `porter unicode61` tokenizer does) and the statistics
 * come from the scope alone.
 */
import { cachedIndexTokens, termTest } from "../../text/index-tokens.ts";
import { bm25Inverse, bm25TermScore } from "../bm25.ts";

export interface ScopeStatistics {
  /** How many active memories the scope holds (the N of the inverse document frequency). */
  readonly documents: number;
  /**
   * Each term's document frequency in the scope, when the candidates are not all of the scope's
   * matches; otherwise counted on the candidates.
   */
  readonly documentFrequency?: ReadonlyMap<string, number>;
}

/**
 * Scores `candidates` (every match of the scope, or its best ones) with BM25 over the scope's
 * statistics; the average length is the candidates' (as the PostgreSQL store does). Sorted best
 * first, ties by the later row.
 */
export function scoreWithScopeStatistics<T extends { readonly content: string }>(
  candidates: readonly T[],
  terms: readonly string[],
  statistics: ScopeStatistics,
): { item: T; score: number }[] {
  const tests = [...new Set(terms)].flatMap((term) => {
    const test = termTest(term);
    return test === undefined ? [] : [{ term, test }];
  });
  if (candidates.length === 0 || tests.length === 0) return [];
  const counted = candidates.map((item) => {
    const tokens = cachedIndexTokens(item.content);
    const frequencies = tests.map(({ test }) => {
      let count = 0;
      for (const token of tokens) if (test(token)) count += 1;
      return count;
    });
    return { item, length: Math.max(tokens.length, 1), frequencies };
  });
  const averageLength = counted.reduce((sum, entry) => sum + entry.length, 0) / counted.length;
  const inverse = tests.map(({ term }, index) => {
    const frequency =
      statistics.documentFrequency?.get(term) ??
      counted.reduce((sum, entry) => sum + (entry.frequencies[index]! > 0 ? 1 : 0), 0);
    return bm25Inverse(Math.max(statistics.documents, frequency), frequency);
  });
  const scored = counted.map((entry, order) => {
    let score = 0;
    entry.frequencies.forEach((tf, index) => {
      if (tf > 0) score += bm25TermScore(inverse[index]!, tf, entry.length, averageLength);
    });
    return { item: entry.item, score, order };
  });
  return scored
    .filter((entry) => entry.score > 0)
    .sort((left, right) => right.score - left.score || left.order - right.order)
    .map(({ item, score }) => ({ item, score }));
}
