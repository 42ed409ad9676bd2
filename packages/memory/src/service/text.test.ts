import assert from "node:assert/strict";
import { it } from "node:test";
import { prefixRoot, queryTerms, searchTerms } from "./text.ts";

it("query words drop stop words and the single letters of possessives", () => {
  assert.deepEqual(queryTerms("When is the user's brother getting married?"), [
    "user",
    "brother",
    "getting",
    "married",
  ]);
  assert.deepEqual(queryTerms("Room 7"), ["room", "7"]);
});

it("a long word searches by the five-letter prefix of its root, so inflections and derivations meet", () => {
  assert.equal(prefixRoot("allergy"), "aller");
  assert.equal(prefixRoot("teaches"), "teach");
  assert.equal(prefixRoot("relocated"), "reloc");
  assert.equal(prefixRoot("travelling"), "trave");
  // Roots shorter than five letters stay exact words: "getting" is "get", not "getti*".
  assert.equal(prefixRoot("getting"), undefined);
  assert.equal(prefixRoot("cooking"), undefined);
  assert.equal(prefixRoot("city"), undefined);
  // Numbers and codes stay exact: order 123456789 is not order 123450000.
  assert.equal(prefixRoot("123456789"), undefined);
  assert.equal(prefixRoot("ab123456"), undefined);
  assert.deepEqual(searchTerms("What allergy does the user have, and who teaches them?"), [
    "aller*",
    "user",
    "teach*",
  ]);
});

it("search terms hold only letters, digits and a trailing prefix mark, whatever the text", () => {
  for (const text of [
    'zebra" OR "x',
    "a:* & !b | (c <-> d)",
    "NEAR(one two) col: ^x",
    "'); DROP TABLE m; --",
  ]) {
    for (const term of searchTerms(text)) assert.match(term, /^[\p{L}\p{N}]+\*?$/u);
  }
});
