import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DurableError } from "../errors/durable-error.ts";
import { redact, validatePolicies } from "./tool-policy.ts";

describe("tool policy", () => {
  test("redact masks named paths (with * wildcards) in a copy and leaves the input untouched", () => {
    const input = {
      card: { number: "4242", cvc: "123" },
      items: [
        { sku: "A", price: 1 },
        { sku: "B", price: 2 },
      ],
      note: "hi",
    };
    const masked = redact(input, ["card.number", "items.*.sku", "missing.path"]);
    assert.deepEqual(masked, {
      card: { number: "[redacted]", cvc: "123" },
      items: [
        { sku: "[redacted]", price: 1 },
        { sku: "[redacted]", price: 2 },
      ],
      note: "hi",
    });
    assert.equal(input.card.number, "4242");
    assert.equal(input.items[0]?.sku, "A");
  });

  test("redact masks a key that holds dots by the path that spells it, under a wildcard too", () => {
    const input = {
      "card.number": "4242",
      meta: { "x.y": { z: "secret", keep: 1 } },
      rows: [{ "a.b": "s" }],
    };
    assert.deepEqual(redact(input, ["card.number", "meta.x.y.z", "rows.*.a.b"]), {
      "card.number": "[redacted]",
      meta: { "x.y": { z: "[redacted]", keep: 1 } },
      rows: [{ "a.b": "[redacted]" }],
    });
    // Split the other way, the same path still reaches nested keys.
    assert.deepEqual(redact({ card: { number: "4242" } }, ["card.number"]), {
      card: { number: "[redacted]" },
    });
  });

  test("redact reaches own enumerable keys only: an array's length and inherited names are left alone", () => {
    const input = { items: [["a"], ["b"]], length: "s", plain: {} };
    assert.deepEqual(
      redact(input, ["items.length", "items.*.length", "plain.constructor", "plain.toString"]),
      input,
    );
    assert.deepEqual(redact(input, ["length", "items.*.*"]), {
      items: [["[redacted]"], ["[redacted]"]],
      length: "[redacted]",
      plain: {},
    });
  });

  test("policies must be plain data of the documented shape", () => {
    assert.deepEqual(validatePolicies({ a: { show: false, redact: ["x"], approve: true } }), {
      a: { show: false, redact: ["x"], approve: true },
    });
    for (const bad of [
      null,
      [],
      { a: null },
      { a: { approve: "yes" } },
      { a: { redact: "x" } },
      { a: { extra: 1 } },
    ]) {
      assert.throws(
        () => validatePolicies(bad),
        (error) => DurableError.isInstance(error) && error.code === "invalid_policy",
      );
    }
  });
});
