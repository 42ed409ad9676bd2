import assert from "node:assert/strict";
import { it } from "node:test";
import fc from "fast-check";
import { type JsonLimits, jsonProblem } from "./common.ts";

/** What a value is, measured the slow, obvious way: its deepest container, entries, JSON bytes, keys. */
function measure(value: unknown) {
  let deepest = -1;
  let entries = 0;
  let proto = false;
  const walk = (item: unknown, depth: number) => {
    if (item === null || typeof item !== "object") return;
    deepest = Math.max(deepest, depth);
    for (const key of Object.keys(item)) {
      if (key === "__proto__") proto = true;
      entries += 1;
      walk((item as Record<string, unknown>)[key], depth + 1);
    }
  };
  walk(value, 0);
  const bytes = Buffer.byteLength(JSON.stringify(value) ?? "");
  return { deepest, entries, bytes, proto };
}

it("a JSON value is refused exactly when it passes a bound (2,000 random values and bounds)", () => {
  fc.assert(
    fc.property(
      fc.jsonValue({ maxDepth: 8 }),
      fc.record({
        bytes: fc.integer({ min: 1, max: 600 }),
        depth: fc.integer({ min: 1, max: 8 }),
        entries: fc.integer({ min: 0, max: 60 }),
      }),
      fc.boolean(),
      (generated, limits: JsonLimits, withProto) => {
        // A "__proto__" own key, as JSON.parse makes it, in some of the objects.
        const value = withProto ? JSON.parse(`{"__proto__":${JSON.stringify(generated)}}`) : generated;
        const { deepest, entries, bytes, proto } = measure(value);
        const over = deepest >= limits.depth || entries > limits.entries || bytes > limits.bytes || proto;
        const problem = jsonProblem(value, limits, "the value");
        assert.equal(
          problem !== undefined,
          over,
          `${problem} (${JSON.stringify({ deepest, entries, bytes, proto })})`,
        );
        if (problem !== undefined) assert.match(problem, /^the value /);
      },
    ),
    { numRuns: 2_000 },
  );
});

/** An array whose item reads are counted: a walk's work, measured without a clock. */
function counted<T>(items: T[], reads: { count: number }): T[] {
  return new Proxy(items, {
    get(target, key, receiver) {
      if (typeof key === "string" && /^\d+$/.test(key)) reads.count += 1;
      return Reflect.get(target, key, receiver);
    },
  });
}

it("a hostile value is refused at the first bound it passes, before any of it is serialized", () => {
  const limits = { bytes: 1_000, depth: 8, entries: 100 };
  const reads = { count: 0 };
  const huge = "x".repeat(50_000_000);
  let deep: unknown = {};
  for (let level = 0; level < 100_000; level += 1) deep = counted([deep], reads);
  const cases = [
    [huge, /a string of 50000000 characters/, 0],
    [counted([huge], reads), /a string of 50000000 characters/, 1],
    [counted(new Array(5_000_000).fill("ab"), reads), /at most 100 keys/, limits.entries + 1],
    [{ many: counted(new Array(600).fill("ab"), reads) }, /at most 100 keys/, limits.entries + 1],
    [deep, /nests at most 8 levels/, limits.depth],
  ] as const;
  const stringify = JSON.stringify;
  let serialized = 0;
  JSON.stringify = ((...args: Parameters<typeof stringify>) => {
    serialized += 1;
    return stringify(...args);
  }) as typeof stringify;
  try {
    for (const [value, expected, mostReads] of cases) {
      reads.count = 0;
      assert.match(jsonProblem(value, limits, "the value") ?? "", expected);
      assert.ok(reads.count <= mostReads, `read ${reads.count} items, at most ${mostReads} needed`);
    }
  } finally {
    JSON.stringify = stringify;
  }
  assert.equal(serialized, 0, "a refused value is never serialized");
});
