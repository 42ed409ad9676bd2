import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { describe, it } from "node:test";

describe("token budgets", () => {
  it("loads the tokenizer on the first count, not on import", async () => {
    const loaded = () =>
      Object.keys(createRequire(import.meta.url).cache).some((path) => path.includes("gpt-tokenizer"));
    const { tokensOf } = await import("./budget.ts");
    const before = loaded();
    assert.ok(tokensOf({ hello: "world" }) > 0);
    assert.equal(before, false, "importing the budgets loaded the tokenizer tables");
    assert.equal(loaded(), true);
  });
});
