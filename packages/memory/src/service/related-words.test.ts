import assert from "node:assert/strict";
import { before, it } from "node:test";
import { openWordNet, type WordNet } from "../text/wordnet.ts";
import { loadRelatedWords, type RelatedWords } from "./related-words.ts";

let relatedWords: RelatedWords;
let wordnet: WordNet;
before(async () => {
  relatedWords = await loadRelatedWords();
  wordnet = await openWordNet();
});

it("a question's word leads to the words a conversation may answer with: synonyms and kinds", () => {
  for (const word of ["work", "works", "Work"]) assert.ok(relatedWords(word).includes("job"), word);
  assert.ok(relatedWords("car").includes("automobile"));
  assert.ok(relatedWords("friend").includes("buddy"));
  assert.ok(relatedWords("kids").includes("child"));
});

it("the asked word and its own forms are never related to it; multi-word lemmas and rare ones are left out", () => {
  for (const word of ["work", "works", "car", "kids", "friend", "family", "study"]) {
    const related = relatedWords(word);
    assert.ok(related.length <= 12, `${word}: ${related.length}`);
    assert.ok(!related.includes(word) && !related.includes(word.replace(/s$/, "")), `${word}: ${related}`);
    assert.ok(
      related.every((other) => /^[a-z'-]+$/.test(other)),
      `${word}: single words only (${related})`,
    );
  }
  assert.ok(!relatedWords("kids").some((word) => ["nipper", "tiddler", "tyke"].includes(word)));
  const tagged = (lemma: string) =>
    (wordnet.entry(lemma, "noun")?.taggedSenses ?? 0) + (wordnet.entry(lemma, "verb")?.taggedSenses ?? 0);
  for (const word of ["work", "instrument", "sport", "name", "car", "hobby"]) {
    for (const other of relatedWords(word)) assert.ok(tagged(other) > 0, `${word} → ${other}: seen tagged`);
  }
});

it("one way: a kind does not ask for its category, and a name or a number asks nothing", () => {
  const violin = relatedWords("violin");
  assert.ok(!violin.includes("instrument") && !violin.includes("bowed"), `${violin}`);
  assert.deepEqual(relatedWords("Ziggy"), []);
  assert.deepEqual(relatedWords("2023"), []);
  assert.deepEqual(relatedWords("__proto__"), []);
  assert.deepEqual(
    relatedWords("constructor"),
    ["builder", "contractor"],
    "an inherited property name is a word",
  );
});

it("the same lookup serves every search of the process", async () => {
  assert.equal(await loadRelatedWords(), relatedWords);
});
