import assert from "node:assert/strict";
import { it } from "node:test";
import { queryTerms } from "./text.ts";

it("query words drop stop words and the single letters of possessives", () => {
  assert.deepEqual(queryTerms("When is the user's brother getting married?"), [
    "user",
    "brother",
    "getting",
    "married",
  ]);
  assert.deepEqual(queryTerms("Room 7"), ["room", "7"]);
});

it("query terms hold only letters and digits, whatever the text", () => {
  for (const text of [
    'zebra" OR "x',
    "a:* & !b | (c <-> d)",
    "NEAR(one two) col: ^x",
    "'); DROP TABLE m; --",
  ]) {
    for (const term of queryTerms(text)) assert.match(term, /^[\p{L}\p{N}]+$/u);
  }
});
