import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { it } from "node:test";
import { prefixWithinTokens } from "./count-tokens.ts";
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

it("finds the same piece within a limit whatever the tokenizer decoded before (a split character included)", () => {
  // gpt-tokenizer's decode shares one streaming decoder, which keeps the bytes of a character split by
  // the last token for the next decode: the piece found shrank after one (a 66-character piece of 54
  // tokens at a limit of 55 was found as 51 characters, 39 tokens).
  const tokenizer = createRequire(import.meta.url)("gpt-tokenizer/encoding/o200k_base") as {
    encode(text: string): number[];
    decode(ids: readonly number[]): string;
  };
  const splitEmoji = tokenizer.encode("🧪").slice(0, 1);
  const text =
    "tß2,Eé1YAxSMéb5vPMth}GqW}6€SdpR{rNj89W4EpjMl据SIYßß8🧪\rd9Uh]O6]dßxM👩‍💻J xbHE[🧪zfjwpi/😀cud";
  for (const limit of [10, 25, 40, 55]) {
    const found = prefixWithinTokens(text, limit);
    assert.ok(countTokens(text.slice(0, found)) <= limit, `${found} characters fit ${limit} tokens`);
    for (let round = 0; round < 3; round++) {
      tokenizer.decode(splitEmoji);
      assert.equal(prefixWithinTokens(text, limit), found, `at ${limit} tokens after a split character`);
    }
  }
  assert.equal(prefixWithinTokens(text, 55), 66);
});
