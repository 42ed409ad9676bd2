/**
 * A keyed call's fingerprint text (ADR 0218): the same as the recursive rebuild-and-stringify it
 * replaced, on thousands of random JSON values (so nodes of either version agree on a key), and
 * written for nesting far past the stack.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { canonicalJson } from "./canonical-json.ts";

/** What the ledger wrote before: every object rebuilt with sorted keys, then JSON.stringify. */
function recursiveCanonical(value: unknown): string {
  const canonical = (inner: unknown): unknown => {
    if (Array.isArray(inner)) return inner.map(canonical);
    if (typeof inner !== "object" || inner === null) return inner;
    return Object.fromEntries(
      Object.keys(inner)
        .sort()
        .map((name) => [name, canonical((inner as Record<string, unknown>)[name])]),
    );
  };
  return JSON.stringify(canonical(value));
}

const names = [
  ...["a", "b", "__proto__", "constructor", "toString", "", "é", "😀", "a.b", "*", "\n"],
  ...["10", "2", "0", "01", "-1", "1.5", "4294967294", "4294967295", "99999999999"],
];

function randomValue(random: () => number, depth: number): unknown {
  const pick = random();
  if (depth > 4 || pick < 0.35) {
    const leaves = [0, -0, 1.5, -7, 1e21, "x", "", 'ü\u2028"\\', true, false, null, Number.NaN, undefined];
    return leaves[Math.floor(random() * leaves.length)];
  }
  if (pick < 0.6)
    return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(random, depth + 1));
  const object: Record<string, unknown> = {};
  for (let index = Math.floor(random() * 5); index > 0; index -= 1) {
    const name = names[Math.floor(random() * names.length)] as string;
    Object.defineProperty(object, name, {
      value: randomValue(random, depth + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return object;
}

/** A small seeded generator (mulberry32), so a failure names its seed. */
function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

test("writes the text the recursive canonical form wrote, for 5,000 random values", () => {
  for (let seed = 1; seed <= 5000; seed += 1) {
    const value = randomValue(seeded(seed), 0) ?? {};
    assert.equal(canonicalJson(value), recursiveCanonical(value), `seed ${seed}`);
  }
  // Parsed JSON with an own `__proto__` key keeps it, as a key like any other.
  const parsed = JSON.parse('{"b":1,"__proto__":{"z":1,"a":2}}');
  assert.equal(canonicalJson(parsed), '{"__proto__":{"a":2,"z":1},"b":1}');
});

test("writes 200,000 levels of nesting, where the recursive form overflows the stack", () => {
  const levels = 200_000;
  const deep = JSON.parse(`${'{"a":['.repeat(levels)}1${"]}".repeat(levels)}`);
  assert.throws(() => recursiveCanonical(deep), RangeError);
  assert.equal(canonicalJson(deep), `${'{"a":['.repeat(levels)}1${"]}".repeat(levels)}`);
});
