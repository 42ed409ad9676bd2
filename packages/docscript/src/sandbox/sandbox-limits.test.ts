/**
 * The host's limits rule, and a failed script says what to change: `timeoutMs` may lower the pool's limit
 * but never raise it; a script that catches its out-of-memory error still ends as `memory_limit`; syntax
 * and runtime errors carry the line and column in the script's own lines and the offending line's text;
 * a refused write that the script did not catch carries the refusal's data. After each, the pool serves
 * the next run.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { measuredLagMs } from "@tackle/test-support";
import { createSandboxPool, type SandboxPool } from "./create-sandbox-pool.ts";

const dispatcherModule = new URL("./fixtures/toy-dispatcher.ts", import.meta.url);
let pool: SandboxPool;

async function assertServes(): Promise<void> {
  const next = await pool.run({ script: `entities.create({ text: "next" });`, input: { notes: [] } });
  assert.equal(next.ok, true, JSON.stringify(next));
}

describe("the host's limits and the errors a script gets back", () => {
  before(async () => {
    pool = createSandboxPool({ dispatcherModule, size: 1, memoryLimitMb: 32, timeoutMs: 300 });
    await pool.run({ script: "", input: {} });
  });
  after(async () => await pool.close());

  test("a run's timeoutMs lowers the host's limit and never raises it", async () => {
    const raised = await pool.run({ script: "while (true) {}", input: {}, timeoutMs: 6000 });
    assert.equal(raised.ok === false && raised.error.code, "timeout");
    assert.deepEqual(raised.ok === false && raised.error.data, { timeoutMs: 300 });
    // The watchdog's slack is 100 ms on a quiet machine, plus how late this machine runs timers now.
    const slack = 100 + (await measuredLagMs());
    assert.ok((raised.scriptMs ?? Number.POSITIVE_INFINITY) <= 300 + slack, `ran ${raised.scriptMs} ms`);
    const lowered = await pool.run({ script: "while (true) {}", input: {}, timeoutMs: 100 });
    assert.deepEqual(lowered.ok === false && lowered.error.data, { timeoutMs: 100 });
    assert.ok(
      (lowered.scriptMs ?? Number.POSITIVE_INFINITY) <= 100 + 100 + (await measuredLagMs()),
      `ran ${lowered.scriptMs} ms`,
    );
    await assertServes();
  });

  test("a memory bomb the script catches still ends as memory_limit", async () => {
    const roomy = createSandboxPool({ dispatcherModule, size: 1, memoryLimitMb: 32, timeoutMs: 20_000 });
    const result = await roomy.run({
      script: `
        let kept = [];
        try { for (let index = 0; ; index++) kept.push(new Array(100000).fill(index)); }
        catch (error) { kept = null; console.log("caught " + error.message); }
      `,
      input: {},
    });
    try {
      assert.equal(result.ok === false && result.error.code, "memory_limit", JSON.stringify(result));
      assert.equal(roomy.stats().killed, 1, "the worker that hit its ceiling is replaced");
      const next = await roomy.run({ script: `entities.create({ text: "next" });`, input: { notes: [] } });
      assert.equal(next.ok, true, JSON.stringify(next));
    } finally {
      await roomy.close();
    }
  });

  test("syntax and runtime errors name the script's own line and column and quote the line", async () => {
    const syntax = await pool.run({ script: `const a = 1;\nconst b = ;\n`, input: {} });
    assert.equal(syntax.ok === false && syntax.error.code, "syntax_error");
    assert.deepEqual(syntax.ok === false && { ...(syntax.error.data as object), column: undefined }, {
      line: 2,
      column: undefined,
      sourceLine: "const b = ;",
    });
    assert.match(syntax.ok === false ? syntax.error.message : "", /line 2/);

    const runtime = await pool.run({
      script: `const notes = entities.list();\nconst missing = notes.find((note) => note.id === "none");\nconsole.log(missing.text.slice(0, 3));`,
      input: { notes: [{ id: "n1", text: "first" }] },
    });
    assert.equal(runtime.ok, false);
    const data = (runtime.ok === false ? runtime.error.data : undefined) as
      | { line: number; column: number; sourceLine: string }
      | undefined;
    assert.equal(data?.line, 3, JSON.stringify(runtime));
    assert.ok((data?.column ?? 0) >= 1);
    assert.equal(data?.sourceLine, "console.log(missing.text.slice(0, 3));");
    assert.match(
      runtime.ok === false ? runtime.error.message : "",
      /TypeError: .*text.* \(line 3, column \d+\)/,
    );
    await assertServes();
  });

  test("an uncaught refused write carries the refusal's data and where the script made it", async () => {
    const result = await pool.run({ script: `\n\nentities.refuse({ text: "x" });`, input: { notes: [] } });
    assert.equal(result.ok === false && result.error.code, "write_refused");
    assert.deepEqual(result.ok === false && result.error.data, {
      key: "entities.refuse",
      line: 3,
      column: (result.ok === false && (result.error.data as { column: number }).column) || -1,
      sourceLine: `entities.refuse({ text: "x" });`,
    });
    await assertServes();
  });
});
