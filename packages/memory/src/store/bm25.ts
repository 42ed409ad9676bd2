/**
 * The BM25 every store and the scope kept in process score with, so a search ranks alike on each
 * (the PostgreSQL store writes the same formula in SQL): FTS5's `bm25()` with its defaults, over a
 * scope's own statistics. Squaring the idf (Lucene's classic weighting) with k1 0.9 was measured and
 * not taken (ADR 0529).
 */

/** Term-frequency saturation. */
export const BM25_K1 = 1.2;
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
