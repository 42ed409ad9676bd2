/**
 * Related words from WordNet (ADR 0518), without a model: "Where does Maya work?" is answered in a
 * conversation by "How is the new job going?", which holds no word of the question. For a question's
 * word, the lemmas of its two most frequent noun and verb senses (synonyms: car → automobile) and of
 * the noun senses one step more specific (hyponyms: work → job, housework), keeping only single words
 * a sense-tagged corpus attests (WordNet lists rare lemmas, "nipper", "tiddler" and "tyke" for a kid,
 * that would flood the query), at most twelve. It goes one way: a question naming the violin asks for the violin and its
 * kinds, never for every instrument (no hypernyms). Chosen over the hand-written table it replaced by
 * bench/memory's ablation: the same held-out recall@10, better @5 and @20.
 */
import { stem } from "../text/index-tokens.ts";
import { openWordNet, type WordNet, type WordNetPos } from "../text/wordnet.ts";

/** The senses of a word read, by frequency (WordNet orders them by their tagged counts). */
const sensesRead = 2;
/** Related words asked per question word. */
const maximumRelated = 12;
/** Words whose answer is kept (a flood of distinct words keeps the last ones, never more). */
const maximumCached = 10_000;

export type RelatedWords = (word: string) => readonly string[];

let opened: Promise<RelatedWords> | undefined;

/**
 * The process's related-words lookup, its WordNet files read on first use (~23 MB, once). A failed read
 * fails the searches waiting on it and is tried again by the next one.
 */
export function loadRelatedWords(): Promise<RelatedWords> {
  opened ??= openWordNet().then(createRelatedWords, (error: unknown) => {
    opened = undefined;
    throw error;
  });
  return opened;
}

/** Forms a word may have in a part of speech's index, each looked up ("kids" → "kids", "kid"). */
function baseForms(word: string, pos: WordNetPos): string[] {
  const forms = [word];
  if (word.endsWith("ies")) forms.push(`${word.slice(0, -3)}y`);
  if (word.endsWith("es")) forms.push(word.slice(0, -2));
  if (word.endsWith("s")) forms.push(word.slice(0, -1));
  if (pos === "verb" && word.endsWith("ing")) forms.push(word.slice(0, -3), `${word.slice(0, -3)}e`);
  if (pos === "verb" && word.endsWith("ed")) forms.push(word.slice(0, -2), word.slice(0, -1));
  return forms;
}

export function createRelatedWords(wordnet: WordNet): RelatedWords {
  const cache = new Map<string, readonly string[]>();
  const attested = (lemma: string) =>
    (wordnet.entry(lemma, "noun")?.taggedSenses ?? 0) + (wordnet.entry(lemma, "verb")?.taggedSenses ?? 0) > 0;

  function lookUp(word: string): readonly string[] {
    const found: string[] = [];
    const own = new Set([stem(word)]);
    const add = (lemma: string) => {
      if (lemma.includes("_") || own.has(stem(lemma)) || found.includes(lemma)) return;
      if (attested(lemma)) found.push(lemma);
    };
    const lemmas = (["noun", "verb"] as const).flatMap((pos) =>
      baseForms(word, pos).flatMap((form) => {
        const entry = wordnet.entry(form, pos);
        return entry ? [{ pos, form, entry }] : [];
      }),
    );
    for (const { form } of lemmas) own.add(stem(form));
    for (const { pos, entry } of lemmas) {
      // The most frequent senses; a word never seen tagged reads its first only.
      const senses = entry.synsets.slice(0, Math.max(1, Math.min(sensesRead, entry.taggedSenses)));
      for (const offset of senses) {
        const synset = wordnet.synset(pos, offset);
        synset.lemmas.forEach(add);
        if (pos === "noun") {
          for (const hyponym of synset.hyponyms) wordnet.synset("noun", hyponym).lemmas.forEach(add);
        }
      }
    }
    return found.slice(0, maximumRelated);
  }

  /** The words related to a question's word (without the word itself), or none. */
  return (word) => {
    const lower = word.toLowerCase();
    if (!/^[a-z][a-z'-]*$/.test(lower)) return [];
    let related = cache.get(lower);
    if (related === undefined) {
      related = lookUp(lower);
      if (cache.size >= maximumCached) cache.delete(cache.keys().next().value!);
      cache.set(lower, related);
    }
    return related;
  };
}
