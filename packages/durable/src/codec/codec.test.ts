import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { ToolError } from "@tackle/core";
import { DurableError } from "../errors/durable-error.ts";
import { codecVersion, decodeValue, encodeValue, maxDepth, roundTrip } from "./codec.ts";
import { fixtureValues } from "./fixtures/fixture-values.ts";

const fixtures = JSON.parse(readFileSync(new URL("./fixtures/journal-v1.json", import.meta.url), "utf8")) as {
  version: number;
  records: Record<string, string>;
};

function sameValue(actual: unknown, expected: unknown): void {
  if (expected instanceof Error) {
    assert.ok(actual instanceof Error);
    assert.equal(actual.name, expected.name);
    assert.equal(actual.message, expected.message);
    assert.equal((actual as ToolError).code, (expected as ToolError).code);
    assert.equal((actual as ToolError).retryable, (expected as ToolError).retryable);
    assert.deepEqual((actual as ToolError).data, (expected as ToolError).data);
    return;
  }
  assert.deepEqual(actual, expected);
}

describe("journal codec", () => {
  test("round-trips undefined, Date, Map, Set, BigInt, Uint8Array, falsy values and odd numbers", () => {
    for (const [name, value] of Object.entries(fixtureValues())) {
      const back = roundTrip(value);
      sameValue(back, value);
      if (name === "negativeZero") assert.ok(Object.is(back, -0));
    }
  });

  test("errors come back with their class name, message and code; a coded one as a ToolError", () => {
    const values = fixtureValues();
    const coded = roundTrip(values.codedError) as ToolError;
    assert.ok(ToolError.isInstance(coded));
    assert.equal(coded.name, "PaymentError");
    assert.equal(coded.code, "card_declined");
    const plain = roundTrip(values.plainError) as Error;
    assert.equal(plain.name, "TypeError");
    assert.equal(plain.message, "bad shape");
  });

  test("keeps inherited property names as keys: a JSON answer's own __proto__, constructor, $t", () => {
    // What JSON.parse makes of an API's answer: "__proto__" an own key, not the prototype.
    const answer = JSON.parse(
      '{"__proto__":{"admin":true},"constructor":"c","toString":1,"items":[{"__proto__":[1,2]},{"$t":"x","__proto__":null}]}',
    ) as Record<string, unknown>;
    const back = roundTrip(answer) as Record<string, unknown>;
    assert.deepEqual(Object.keys(back), ["__proto__", "constructor", "toString", "items"]);
    assert.ok(Object.hasOwn(back, "__proto__"));
    assert.equal(Object.getPrototypeOf(back), Object.prototype);
    assert.equal((back as { admin?: unknown }).admin, undefined);
    assert.equal(JSON.stringify(back), JSON.stringify(answer));
    assert.equal(decodeValue(encodeValue(answer)) instanceof Object, true);
  });

  test(`refuses a value nested past ${maxDepth} levels by name; keeps one at the bound`, () => {
    const nested = (depth: number) => JSON.parse(`${"[".repeat(depth)}${"]".repeat(depth)}`) as unknown;
    assert.deepEqual(roundTrip(nested(maxDepth)), nested(maxDepth));
    for (const depth of [maxDepth + 1, 200_000]) {
      assert.throws(
        () => encodeValue({ input: nested(depth) }),
        (error: unknown) =>
          DurableError.isInstance(error) &&
          error.code === "not_serializable" &&
          /nested more than/.test(error.message),
      );
    }
  });

  test("refuses, at record time, a value that would come back different, naming where it is", () => {
    class Handle {
      socket = 1;
    }
    const cases: [unknown, RegExp][] = [
      [{ order: { handle: new Handle() } }, /value\.order\.handle: an instance of Handle/],
      [{ callback: () => 1 }, /value\.callback: a function/],
      [[1, Symbol("s")], /value\[1\]: a symbol/],
      [{ items: new Map([["k", new WeakMap()]]) }, /an instance of WeakMap/],
      [new Float64Array(2), /an instance of Float64Array/],
      [{ promise: Promise.resolve(1) }, /an instance of Promise/],
      // biome-ignore lint/suspicious/noSparseArray: a sparse array is the case under test
      [[1, , 3], /value\[1\]: a hole in a sparse array/],
    ];
    for (const [value, message] of cases) {
      assert.throws(
        () => encodeValue(value),
        (error) =>
          DurableError.isInstance(error) && error.code === "not_serializable" && message.test(error.message),
      );
    }
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    assert.throws(() => encodeValue(circular), /value\.self: a circular reference/);
  });

  test("a record that does not decode fails with journal_decode_failed, never a wrong value", () => {
    for (const text of ["{not json", '{"v":1}', '{"v":99,"value":1}', '{"v":1,"value":{"$t":"mystery"}}']) {
      assert.throws(
        () => decodeValue(text, "step x"),
        (error) =>
          DurableError.isInstance(error) &&
          error.code === "journal_decode_failed" &&
          /step x/.test(error.message),
      );
    }
  });

  test(`frozen fixtures of journal schema version ${codecVersion} decode to their values and are written byte for byte`, () => {
    assert.equal(fixtures.version, codecVersion);
    const values = fixtureValues();
    assert.deepEqual(Object.keys(fixtures.records).sort(), Object.keys(values).sort());
    for (const [name, text] of Object.entries(fixtures.records)) {
      sameValue(decodeValue(text), values[name]);
      assert.equal(
        encodeValue(values[name]),
        text,
        `the encoding of "${name}" changed: bump codecVersion and add fixtures`,
      );
    }
  });
});
