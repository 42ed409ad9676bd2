/**
 * The three escape classes found against the worker + `vm` sandbox, each as an attacker wrote it:
 * (1) a value thrown where the worker's own code handles an error reaches Node's crash reporting, which
 * hands the value's inspect hook `inspect` (and with it `process`); (2) a `FinalizationRegistry` left by
 * one run acts inside a later run through that run's bridge; (3) a prototype `toJSON` trap forges the
 * messages the bridge sends. Each must end with a clear error or be harmless, write nothing outside its
 * own run, and leave the pool serving the next run.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, beforeEach, describe, test } from "node:test";
import { createSandboxPool, type SandboxPool, type SandboxRunResult } from "./create-sandbox-pool.ts";

const dispatcherModule = new URL("./fixtures/toy-dispatcher.ts", import.meta.url);
const directory = mkdtempSync(join(tmpdir(), "docscript-found-"));
const marker = join(directory, "escaped");

/** An object whose Node inspect hook, if ever called by the host, uses `inspect` to reach `process`. */
const inspectTrap = `
const thrown = {
  message: "trap",
  [Symbol.for("nodejs.util.inspect.custom")](depth, options, inspect) {
    try {
      const reached = inspect.constructor("return process")();
      reached.getBuiltinModule("fs").writeFileSync(${JSON.stringify(marker)}, "inspect");
    } catch (_) {}
    return "trap";
  },
};
`;

/** A later run that allocates and waits on the host, as any long run does: garbage collection happens in it. */
const churn = `for (let turn = 0; turn < 20; turn++) {
  const junk = [];
  for (let index = 0; index < 10000; index++) junk.push({ index });
  await entities.materialize("n1");
}`;

let pool: SandboxPool;

async function run(script: string, notes = [{ id: "n1", text: "first" }], timeoutMs = 20_000) {
  return await pool.run({
    script,
    input: { notes },
    timeoutMs,
    onHostCall: async () => "stored content",
  });
}

function notesOf(result: SandboxRunResult): string[] {
  return result.ok ? (result.value as { notes: { text: string }[] }).notes.map((note) => note.text) : [];
}

async function assertServes(): Promise<void> {
  const next = await run(`entities.create({ text: "next" }); console.log(typeof process);`);
  assert.equal(next.ok, true, JSON.stringify(next));
  assert.deepEqual(notesOf(next), ["first", "next"]);
}

describe("the escape classes found against the previous sandbox", () => {
  // A pool per test: what one attack leaves in a worker must not decide the next test.
  beforeEach(async () => {
    rmSync(marker, { force: true });
    pool = createSandboxPool({ dispatcherModule, size: 1, memoryLimitMb: 64 });
    await pool.run({ script: "", input: {} });
  });
  afterEach(async () => await pool.close());
  after(() => rmSync(directory, { recursive: true, force: true }));

  test("class 1: a throwing toJSON trap where the host serialises, with an inspect hook, never reaches process", async () => {
    const result = await run(`${inspectTrap}
      Object.defineProperty(Object.prototype, "toJSON", {
        configurable: true,
        enumerable: false,
        value() {
          if (this !== null && this.code === "script_error") throw thrown;
          return this;
        },
      });
      Promise.reject(new Error("left unhandled"));
      for (let turn = 0; turn < 5; turn++) await entities.materialize("n1");
    `);
    assert.equal(existsSync(marker), false, "the script's inspect hook reached process and wrote the marker");
    assert.notEqual(result.ok === false && result.error.code, "sandbox_crashed", JSON.stringify(result));
    await assertServes();
  });

  test("class 1: a FinalizationRegistry cleanup that throws an inspect-hooked value never reaches process", async () => {
    const result = await run(`${inspectTrap}
      const registry = new FinalizationRegistry(() => { throw thrown; });
      globalThis.keep = registry;
      (() => { for (let index = 0; index < 2000; index++) registry.register({ index }, index); })();
    `);
    // Cleanup callbacks run when the engine decides: later runs on the same worker give them their chance.
    const later: SandboxRunResult[] = [];
    for (let index = 0; index < 4; index++) later.push(await run(churn));
    assert.equal(existsSync(marker), false, "the cleanup callback's value reached process");
    for (const each of [result, ...later])
      assert.notEqual(each.ok === false && each.error.code, "sandbox_crashed", JSON.stringify(each));
    await assertServes();
  });

  test("class 2: a run's FinalizationRegistry never acts inside a later run on another document", async () => {
    const first = await run(
      `
      const registry = new FinalizationRegistry(() => {
        try { entities.create({ text: "written by the run on A: " + entities.list().map((note) => note.text).join("|") }); } catch (_) {}
      });
      globalThis.keep = registry;
      (() => { for (let index = 0; index < 2000; index++) registry.register({ index }, index); })();
    `,
      [{ id: "a1", text: "document A" }],
    );
    // Whatever the engine does with the registry, the first run itself must not fail the host.
    assert.notEqual(first.ok === false && first.error.code, "sandbox_crashed");
    for (let index = 0; index < 4; index++) {
      const second = await run(churn, [{ id: "n1", text: "secret caption of B" }]);
      assert.equal(second.ok, true, JSON.stringify(second));
      assert.deepEqual(notesOf(second), ["secret caption of B"], "run A wrote into run B's plan");
    }
    await assertServes();
  });

  test("class 3: a toJSON trap cannot choose the kind, binding or method of what the bridge sends", async () => {
    const result = await run(`
      Object.defineProperty(Object.prototype, "toJSON", {
        configurable: true,
        enumerable: false,
        value() {
          if (this !== null && this.kind === "call") return { kind: "call", binding: "admin", method: "drop", args: [] };
          if (this !== null && this.kind === "console") return { kind: "finish", outcome: { ok: true } };
          return this;
        },
      });
      let answer;
      try { answer = "listed " + entities.list().length; } catch (error) { answer = "refused " + error.code + " " + JSON.stringify(error.data); }
      delete Object.prototype.toJSON;
      console.log(answer);
      Object.defineProperty(Object.prototype, "toJSON", {
        configurable: true,
        enumerable: false,
        value() { return this !== null && this.kind === "console" ? { kind: "finish", outcome: { ok: true } } : this; },
      });
      console.log("forged finish");
      delete Object.prototype.toJSON;
      throw new Error("the script failed after the forged finish");
    `);
    const text = JSON.stringify(result);
    assert.ok(!text.includes("admin.drop"), `the dispatcher received a forged binding: ${text}`);
    assert.equal(result.ok, false, `a forged finish ended the run as a success: ${text}`);
    assert.match(result.ok ? "" : result.error.message, /the script failed after the forged finish/);
    await assertServes();
  });
});
