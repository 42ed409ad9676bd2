/**
 * The BM25 every store and the scope kept in process score with, so a search ranks alike on each
 * (the PostgreSQL store writes the same formula in SQL): FTS5's `bm25()` over a scope's own
 * statistics, with k1 at 0.9 rather than 1.2 (ADR 0530). Squaring the idf (Lucene's classic
 * weighting) was measured and not taken (ADR 0529).
 */

/**
 * Term-frequency saturation: 0.9 (Anserini's default) rather than FTS5's 1.2, since a conversation
 * turn is a sentence or two, where a word said twice is rarely twice as much about it (ADR 0530).
 */
export const BM25_K1 = 0.9;
/** Length normalization. */
export const BM25_B = 0.75;

/** BM25's inverse document frequency of a term held by `frequency` of `documents` documents. */
export function bm25Inverse(documents: number, frequency: number): number {
  return Math.log(1 + (documents - frequency + 0.5) / (frequency + 0.5));
}

/** One term's share of a document's BM25 score: its frequency there, saturated and length-normalized. */
export function bm25TermScore(inverse: number, tf: number, length: number, averageLength: number): number {
  return (inverse * tf * (BM25_K1 + 1)) / (tf + BM25_K1 * (1 - BM25_B + (BM25_B * length) / averageLength));
}
