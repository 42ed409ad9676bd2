/** Text helpers of retrieval: words for BM25, a normalized hash for duplicates, token estimates. */
import { createHash } from "node:crypto";

const stopWords = new Set(
  "a an and are as at be but by did do does for from had has have how i in is it its me my of on or our so that the their them they this to was we were what when where which who why will with you your".split(
    " ",
  ),
);

/** Whether a word is one of the stop words `queryTerms` drops ("the", "what", "when"). */
export function isStopWord(word: string): boolean {
  return stopWords.has(word.toLowerCase());
}

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

/** Inflectional endings dropped before truncating a word to its prefix (longest first). */
const endings = ["ings", "ing", "ies", "ied", "ed", "es", "s"];
/** Five letters: truncation to five is the classic English setting, about as good as a stemmer. */
const prefixLength = 5;

/**
 * The root a word's prefix search starts from: common inflections dropped, a doubled final consonant
 * undone ("getting" → "get"), then cut to five letters. Undefined when the root is shorter than that
 * or the word holds a digit (the word is then matched exactly, as the index's stemmer does).
 */
export function prefixRoot(word: string): string | undefined {
  // Numbers and codes with digits ("order 123456789", "A1234567") must match exactly.
  if (!/^\p{L}+$/u.test(word)) return undefined;
  let root = word;
  for (const ending of endings) {
    if (root.length - ending.length >= 3 && root.endsWith(ending)) {
      root = root.slice(0, -ending.length);
      break;
    }
  }
  if (/([b-df-hj-np-tv-z])\1$/.test(root) && !/(ss|ll)$/.test(root)) root = root.slice(0, -1);
  return root.length >= prefixLength && word.length > prefixLength ? root.slice(0, prefixLength) : undefined;
}

/**
 * The words a search asks the store for: `queryTerms`, each word long enough replaced by the prefix
 * of its root (`"allergy"` → `"aller*"`, which also finds "allergic"; `"teaches"` → `"teach*"`, which
 * also finds "teacher"). A term ending in `*` is a prefix to the stores.
 */
export function searchTerms(text: string): string[] {
  return [
    ...new Set(
      queryTerms(text).map((word) => {
        const root = prefixRoot(word);
        return root === undefined ? word : `${root}*`;
      }),
    ),
  ];
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
