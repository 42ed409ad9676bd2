import assert from "node:assert/strict";
import { it } from "node:test";
import { countTokens, fitsTokens, tokensOf } from "./index.ts";

it("counts o200k tokens, a value as its JSON, and text that spells a special token as plain text", () => {
  assert.equal(countTokens("hello world"), 2);
  assert.equal(tokensOf({ a: 1 }), countTokens('{"a":1}'));
  assert.equal(tokensOf("plain"), countTokens("plain"));
  assert.ok(countTokens("a <|endoftext|> b") > 3);
});

it("fitsTokens answers a long text at the limit's cost and agrees with the count", () => {
  const long = "one line of a long answer\n".repeat(50_000);
  const exact = countTokens(long.slice(0, 4_000));
  assert.equal(fitsTokens(long.slice(0, 4_000), exact), true);
  assert.equal(fitsTokens(long.slice(0, 4_000), exact - 1), false);
  assert.equal(fitsTokens(long, 1_000), false);
});

it("counts a long run of one character class (no spaces, no punctuation) in linear time", () => {
  for (const text of ["A".repeat(400_000), "😀".repeat(200_000), " ".repeat(400_000)]) {
    const started = performance.now();
    const tokens = countTokens(text);
    assert.ok(tokens > 0 && tokens <= text.length, `${tokens} tokens`);
    assert.equal(fitsTokens(text, 1_000), false);
    assert.ok(performance.now() - started < 5_000, `took ${performance.now() - started} ms`);
  }
  // Sliced, a run counts close to what the tokenizer counts it whole.
  const whole = "=".repeat(2_000);
  assert.ok(Math.abs(countTokens(whole) - countTokens(whole.slice(0, 1_000)) * 2) <= 20);
});

it("never counts more tokens than the text has UTF-8 bytes (a small answer is judged by its bytes)", () => {
  for (const text of ["plain words", "😀 emoji ü ñ 中文", "A".repeat(1_000), `${"{".repeat(300)}x`]) {
    assert.ok(countTokens(text) <= Buffer.byteLength(text), text.slice(0, 20));
  }
});
