/**
 * Words as the SQLite index's `porter unicode61` tokenizer sees them (folded, lowercased, Porter
 * stems), and the test of a query term against them: shared by the SQLite store's BM25 and the
 * service's conversation features, so both count a word the same way.
 */
import { stemmer } from "stemmer";

const stems = new Map<string, string>();
const maximumCachedStems = 50_000;

/** The Porter stem of a lowercased word (ASCII words only, as FTS5's porter tokenizer does). */
export function stem(word: string): string {
  let stemmed = stems.get(word);
  if (stemmed === undefined) {
    stemmed = /^[a-z]+$/.test(word) ? stemmer(word) : word;
    if (stems.size >= maximumCachedStems) stems.clear();
    stems.set(word, stemmed);
  }
  return stemmed;
}

function fold(text: string): string {
  // ASCII has nothing to fold: skip the normalization (most turns are ASCII).
  if (/^[\t\n\r -~]*$/.test(text)) return text.toLowerCase();
  return text.normalize("NFKD").replace(/\p{M}/gu, "").toLowerCase();
}

/** A text's tokens as the `porter unicode61` tokenizer indexes them: folded, lowercased, stemmed. */
export function indexTokens(text: string): string[] {
  const tokens: string[] = [];
  for (const word of fold(text).split(/[^\p{L}\p{N}]+/u)) {
    if (word.length > 0) tokens.push(stem(word));
  }
  return tokens;
}

const tokenized = new Map<string, readonly string[]>();
const maximumCachedTexts = 20_000;

/** `indexTokens`, remembered for the texts seen last (a search reads the same turns several times). */
export function cachedIndexTokens(text: string): readonly string[] {
  let tokens = tokenized.get(text);
  if (tokens === undefined) {
    tokens = indexTokens(text);
    if (tokenized.size >= maximumCachedTexts) tokenized.clear();
    tokenized.set(text, tokens);
  }
  return tokens;
}

/** What a query term matches: one stemmed word, or (`teach*`) every token starting with either form. */
export function termMatch(term: string): { word: string; stemmed: string; prefix: boolean } | undefined {
  const word = fold(term).replace(/[^\p{L}\p{N}]/gu, "");
  if (word.length === 0) return undefined;
  return { word, stemmed: stem(word), prefix: term.endsWith("*") };
}

/** A query term's test on an indexed token: an exact word (stemmed) or a prefix (`teach*`). */
export function termTest(term: string): ((token: string) => boolean) | undefined {
  const match = termMatch(term);
  if (match === undefined) return undefined;
  const { word, stemmed } = match;
  if (!match.prefix) return (token) => token === stemmed;
  return (token) => token.startsWith(word) || token.startsWith(stemmed);
}
