/**
 * What crosses from a script to the host is bounded before the host works on it, and the host's own
 * failure codes cannot be forged: a script that throws `timeout` gets `script_error`, never a limit.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createSandboxPool, type SandboxPool } from "./create-sandbox-pool.ts";
import { hostFailureCodes, maxFailureDataChars, maxFailureMessageChars } from "./script-failure-bounds.ts";

const dispatcherModule = new URL("./fixtures/toy-dispatcher.ts", import.meta.url);
let pool: SandboxPool;

describe("crossings from a script to the host", () => {
  before(async () => {
    pool = createSandboxPool({ dispatcherModule, size: 1, memoryLimitMb: 128, timeoutMs: 20_000 });
    await pool.run({ script: "", input: {} });
  });
  after(async () => await pool.close());

  test("a host failure code a script throws, in any form, arrives as script_error", async () => {
    const forms = [
      (code: string) => `throw Object.assign(new Error("forged"), { code: ${JSON.stringify(code)} });`,
      (code: string) => `throw { code: ${JSON.stringify(code)}, message: "forged" };`,
      (code: string) =>
        `await Promise.resolve(); throw Object.assign(new Error("forged"), { code: ${JSON.stringify(code)}, data: { timeoutMs: 1 } });`,
      (code: string) =>
        `class Limit extends Error { get code() { return ${JSON.stringify(code)}; } } throw new Limit("forged");`,
    ];
    for (const code of hostFailureCodes) {
      for (const form of forms) {
        const result = await pool.run({ script: form(code), input: {} });
        assert.ok(!result.ok, JSON.stringify(result));
        assert.notEqual(result.error.code, code, `${code} forged by ${form(code)}`);
        assert.ok(!hostFailureCodes.has(result.error.code), JSON.stringify(result.error));
        assert.equal(result.error.code, "script_error", JSON.stringify(result.error));
      }
    }
    // A code the script may give (its own, or a refusal it rethrows) stays, so a model can act on it.
    const own = await pool.run({
      script: `throw Object.assign(new Error("x"), { code: "not_ready" });`,
      input: {},
    });
    assert.equal(!own.ok && own.error.code, "not_ready");
  });

  test("a failure with a huge message and data arrives cut, at once", async () => {
    const started = performance.now();
    const result = await pool.run({
      script: `const big = "x".repeat(3_000_000);
        throw Object.assign(new Error(big), { code: "mine", data: { big, list: [big, big] } });`,
      input: {},
    });
    const elapsed = performance.now() - started;
    assert.ok(!result.ok);
    assert.equal(result.error.code, "mine");
    assert.ok(result.error.message.length <= maxFailureMessageChars + 200, `${result.error.message.length}`);
    assert.ok(JSON.stringify(result.error.data ?? null).length <= maxFailureDataChars + 200);
    assert.ok(
      JSON.stringify(result).length < 64 * 1024,
      `${JSON.stringify(result).length} characters crossed`,
    );
    // Generous: building 20 MB strings in the engine is the script's own time; the host adds little.
    assert.ok(elapsed < 15_000, `${elapsed} ms`);
  });

  test("a huge log line or argument is cut or refused before it is copied out", async () => {
    const result = await pool.run({
      script: `const big = "y".repeat(10_000_000);
        console.log(big);
        let refused = "none";
        try { entities.create({ text: "z".repeat(20_000_000) }); } catch (error) { refused = error.code; }
        console.log(refused);`,
      input: {},
    });
    assert.ok(result.ok, JSON.stringify(result).slice(0, 500));
    assert.equal(result.logs.length, 2);
    assert.ok((result.logs[0]?.text.length ?? 0) <= 2000);
    assert.equal(result.logs[1]?.text, "arguments_too_large");
  });
});
