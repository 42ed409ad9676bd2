import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { before, it } from "node:test";
import { openWordNet, type WordNet, wordNetDictionary } from "./wordnet.ts";

let wordnet: WordNet;
before(async () => {
  wordnet = await openWordNet();
});

it("every lemma of the noun and verb indexes is found by bisection, with the synsets its line names", () => {
  for (const pos of ["noun", "verb"] as const) {
    const lines = readFileSync(join(wordNetDictionary(), `index.${pos}`), "latin1")
      .split("\n")
      .filter((line) => line !== "" && !line.startsWith("  "));
    assert.ok(lines.length > (pos === "noun" ? 100_000 : 10_000), `${pos}: ${lines.length} lemmas`);
    for (const line of lines) {
      const fields = line.trim().split(" ");
      const offsets = fields.slice(-Number(fields[2])).map(Number);
      assert.deepEqual(wordnet.entry(fields[0]!, pos)?.synsets, offsets, `${pos} ${fields[0]}`);
    }
  }
});

it("a word the index lacks is not found, even where it is a prefix of a lemma or a lemma of it", () => {
  for (const word of ["wor", "workx", "zzzzzz", "aaaaa", "", "violin fiddle", "Violin"]) {
    assert.equal(wordnet.entry(word, "noun"), undefined, word);
  }
  assert.ok(wordnet.entry("work", "noun") && wordnet.entry("workbench", "noun"));
});

it("a synset read at its offset gives its lemmas and its more specific noun synsets", () => {
  const violin = wordnet.entry("violin", "noun")!;
  assert.ok(violin.taggedSenses > 0);
  assert.deepEqual(wordnet.synset("noun", violin.synsets[0]!).lemmas, ["violin", "fiddle"]);
  const instrument = wordnet.entry("musical_instrument", "noun")!;
  const kinds = wordnet
    .synset("noun", instrument.synsets[0]!)
    .hyponyms.flatMap((offset) => wordnet.synset("noun", offset).lemmas);
  assert.ok(kinds.includes("stringed_instrument") && kinds.includes("percussion_instrument"), kinds.join());
  assert.equal(wordnet.entry("sackbut", "noun")!.taggedSenses, 0, "a rare lemma is never seen tagged");
});
