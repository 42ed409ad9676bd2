/** Text helpers of retrieval: words for BM25, a normalized hash for duplicates, token estimates. */
import { createHash } from "node:crypto";

const stopWords = new Set(
  "a an and are as at be but by did do does for from had has have how i in is it its me my of on or our so that the their them they this to was we were what when where which who why will with you your".split(
    " ",
  ),
);

/**
 * Lowercase words (letters and digits), stop words dropped, duplicates removed, at most 32. Single
 * letters are dropped too: they are the fragments of possessives and contractions ("user's" splits
 * into "user" and "s"), and as a query term "s" matched every possessive in the store.
 */
export function queryTerms(text: string): string[] {
  const words = text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  const terms = [
    ...new Set(words.filter((word) => !stopWords.has(word) && (word.length > 1 || /\p{N}/u.test(word)))),
  ];
  return (terms.length > 0 ? terms : [...new Set(words)]).slice(0, 32);
}

/** The words of a text as a set, for token-overlap similarity. */
export function wordSet(text: string): Set<string> {
  return new Set(queryTerms(text));
}

/** Jaccard similarity of two texts' word sets, 0..1. */
export function textSimilarity(left: string, right: string): number {
  return jaccard(wordSet(left), wordSet(right));
}

/** Jaccard similarity of two word sets, 0..1. */
export function jaccard(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  if (a.size === 0 && b.size === 0) return 1;
  let shared = 0;
  for (const word of a) if (b.has(word)) shared += 1;
  return shared / (a.size + b.size - shared);
}

/** Same hash for texts that differ only in case, spacing and trailing punctuation. */
export function contentHash(text: string): string {
  const normalized = text
    .toLowerCase()
    .replace(/\s+/g, " ")
    .replace(/[.!?\s]+$/u, "")
    .trim();
  return createHash("sha256").update(normalized).digest("hex");
}

/** A cheap token estimate (four characters a token), the unit of the context bundle's budget. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}
