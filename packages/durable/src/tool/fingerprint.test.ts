/** An approval is bound to the arguments' fingerprint: every key counts, inherited names included. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { fingerprint } from "./fingerprint.ts";

test("key order does not matter; every key does, __proto__ and constructor too", () => {
  assert.equal(fingerprint({ a: 1, b: { c: 2, d: 3 } }), fingerprint({ b: { d: 3, c: 2 }, a: 1 }));
  const plain = fingerprint({ amount: 5 });
  for (const text of [
    '{"amount":5,"__proto__":{"amount":500}}',
    '{"amount":5,"constructor":{"to":"attacker"}}',
    '{"amount":5,"nested":{"__proto__":{"x":1}}}',
  ]) {
    assert.notEqual(fingerprint(JSON.parse(text)), plain, text);
  }
  assert.notEqual(
    fingerprint(JSON.parse('{"__proto__":{"to":"a"}}')),
    fingerprint(JSON.parse('{"__proto__":{"to":"b"}}')),
  );
});
