/** `copyValue` makes what `structuredClone` makes of a stored value, sharing nothing with it. */
import assert from "node:assert/strict";
import { it } from "node:test";
import { copyValue } from "./copy-value.ts";

/** A random stored value: null, booleans, numbers, strings, lists and records, nested. */
function randomValue(random: () => number, depth: number): unknown {
  const pick = Math.floor(random() * (depth > 3 ? 5 : 7));
  if (pick === 0) return null;
  if (pick === 1) return random() < 0.5;
  if (pick === 2) return Math.floor(random() * 1e6) / 7;
  if (pick === 3) return random().toString(36).slice(2);
  if (pick === 4) return "";
  if (pick === 5)
    return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(random, depth + 1));
  const record: Record<string, unknown> = {};
  const keys = ["a", "b", "constructor", "toString", "0", "__proto__"];
  for (const key of keys) {
    if (random() < 0.4)
      Object.defineProperty(record, key, {
        value: randomValue(random, depth + 1),
        enumerable: true,
        writable: true,
        configurable: true,
      });
  }
  return record;
}

function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

it("copies 2,000 random stored values as structuredClone does, sharing no object", () => {
  const random = seeded(7);
  for (let round = 0; round < 2000; round++) {
    const value = randomValue(random, 0);
    const copy = copyValue(value);
    assert.deepStrictEqual(copy, structuredClone(value));
    const shared = (a: unknown, b: unknown): boolean => {
      if (typeof a !== "object" || a === null) return false;
      if (a === b) return true;
      return Object.keys(a).some((key) =>
        shared((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key]),
      );
    };
    assert.equal(shared(value, copy), false, `round ${round} shares an object with its copy`);
  }
});

it("keeps a __proto__ key a key, and leaves other shapes to structuredClone", () => {
  const record = JSON.parse('{"__proto__": {"polluted": true}, "x": 1}') as Record<string, unknown>;
  const copy = copyValue(record);
  assert.equal(Object.getPrototypeOf(copy), Object.prototype);
  assert.deepEqual(Object.keys(copy), ["__proto__", "x"]);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
  const bytes = new Uint8Array([1, 2, 3]);
  const copied = copyValue({ bytes }).bytes;
  assert.deepEqual(copied, bytes);
  assert.notEqual(copied, bytes);
});
