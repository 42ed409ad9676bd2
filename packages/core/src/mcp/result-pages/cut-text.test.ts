/**
 * What cutting a long answer costs: the characters the tokenizer reads to find the piece that fits
 * the budget, as a multiple of the piece kept. A search by whole counts (a guess, then halving) read
 * the piece six to eleven times over (264,862 characters for a 42,180-character piece of English,
 * 131,142 for 11,713 of base64); one pass over the windows reads it about twice (the pass, then the
 * check of the piece chosen). Counted by wrapping the tokenizer's own functions, so the figure does
 * not depend on the machine's load.
 */
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { after, before, test } from "node:test";
import { countTokens } from "../../tokens/count-tokens.ts";
import { cutText } from "./cut-text.ts";

interface Tokenizer {
  countTokens(text: string, options?: unknown): number;
  encode(text: string, options?: unknown): number[];
}
const tokenizer = createRequire(import.meta.url)("gpt-tokenizer/encoding/o200k_base") as Tokenizer;
const original = { countTokens: tokenizer.countTokens, encode: tokenizer.encode };
let read = 0;
before(() => {
  tokenizer.countTokens = (text, options) => {
    read += text.length;
    return original.countTokens(text, options);
  };
  tokenizer.encode = (text, options) => {
    read += text.length;
    return original.encode(text, options);
  };
});
after(() => Object.assign(tokenizer, original));

/** Deterministic texts of about `size` characters, of the kinds tools answer with. */
function texts(size: number): Record<string, string> {
  const words = "the quick brown fox jumps over a lazy dog while seventeen engineers argue".split(" ");
  const english: string[] = [];
  for (let index = 0, length = 0; length < size; index++) {
    const word = `${words[(index * 7919) % words.length]}${index % 13 === 0 ? ".\n" : " "}`;
    english.push(word);
    length += word.length;
  }
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  let state = 7;
  const base64 = Array.from({ length: size }, () => {
    state = (state * 16_807) % 2_147_483_647;
    return alphabet[state % 64];
  }).join("");
  const rows = Array.from({ length: Math.ceil(size / 60) }, (_, id) => ({
    id,
    name: `item ${id}`,
    score: id / 7,
  }));
  return {
    english: english.join(""),
    base64,
    json: JSON.stringify(rows),
    cjk: "数据库连接失败请稍后重试。".repeat(Math.ceil(size / 13)),
  };
}

test("a cut reads at most three times the piece it keeps, whatever the answer's kind, size or offset", () => {
  for (const [kind, text] of Object.entries(texts(1_000_000))) {
    for (const [start, limit] of [
      [0, 8000],
      [0, 2000],
      [250_003, 8000],
    ] as const) {
      read = 0;
      const end = cutText(text, start, limit);
      const cost = read;
      const piece = text.slice(start, end);
      assert.ok(end > start && end < text.length, `${kind}: cut at ${end}`);
      assert.ok(countTokens(piece) <= limit, `${kind}: the piece does not fit ${limit}`);
      assert.ok(
        cost <= 3 * piece.length,
        `${kind} from ${start} to ${limit} tokens: read ${cost} characters for a piece of ${piece.length}`,
      );
    }
  }
});
