/**
 * The sandbox escape suite: each attack tries to reach the worker's realm (its `Function`, and with it
 * `process`) and, if it ever did, would write a marker file. Each must be contained: no marker, no
 * `ESCAPED` line, the run ends within its timeout plus 100 ms, and the pool serves the next run.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { measuredLagMs, underLoadMs } from "@tackle/test-support";
import { createSandboxPool, type SandboxPool, type SandboxRunResult } from "./create-sandbox-pool.ts";

const dispatcherModule = new URL("./fixtures/toy-dispatcher.ts", import.meta.url);
const directory = mkdtempSync(join(tmpdir(), "docscript-escape-"));
const marker = join(directory, "escaped");

/** In-script helper: if `value` leads to a Function that compiles strings, use it to reach `process`. */
const probe = `
let probes = 0;
const log = console.log;
const reportProbes = () => log("probes " + probes);
function probe(label, value) {
  probes++;
  const candidates = [];
  try { if (typeof value === "function") candidates.push(value); } catch (_) {}
  try { candidates.push(value.constructor); } catch (_) {}
  try { candidates.push(value.constructor.constructor); } catch (_) {}
  try { candidates.push(Object.getPrototypeOf(value).constructor.constructor); } catch (_) {}
  try { candidates.push(value.__proto__.__proto__.constructor.constructor); } catch (_) {}
  for (let index = 0; index < candidates.length; index++) {
    const candidate = candidates[index];
    let reached;
    try { reached = candidate("return process")(); } catch (_) { continue; }
    try { reached.getBuiltinModule("fs").writeFileSync(${JSON.stringify(marker)}, label); } catch (_) {}
    console.log("ESCAPED " + label + " " + typeof reached);
  }
}
`;

let pool: SandboxPool;

type Attacked = SandboxRunResult & { elapsedMs: number; lagMs: number };

async function attack(script: string, timeoutMs = 2000): Promise<Attacked> {
  const started = performance.now();
  const result = await pool.run({
    script: `${probe}\n${script}\nreportProbes();`,
    input: { notes: [{ id: "n1", text: "first" }] },
    timeoutMs,
    onHostCall: async (_method, payload) => {
      if ((payload as { id?: unknown }).id === "missing")
        throw Object.assign(new Error("no such file"), { code: "not_found" });
      return "stored content";
    },
  });
  const elapsedMs = performance.now() - started;
  return { ...result, elapsedMs, lagMs: await measuredLagMs() };
}

function assertContained(result: SandboxRunResult & { elapsedMs: number }, minimumProbes = 1): void {
  const lines = result.logs.map((line) => line.text);
  assert.ok(!lines.some((line) => line.startsWith("ESCAPED")), `escaped: ${lines.join("\n")}`);
  assert.equal(existsSync(marker), false, "the marker file was written from inside the sandbox");
  if (minimumProbes > 0) {
    const counted = lines.find((line) => line.startsWith("probes "));
    assert.ok(
      counted !== undefined && Number(counted.slice(7)) >= minimumProbes,
      `too few probes ran: ${counted}`,
    );
  }
}

/**
 * The run ends within its timeout plus 100 ms, counted from the script's start as the host saw it, plus
 * the machine's timer lag measured just after the run (the watchdog's own timer waits for a core too).
 */
function assertEndsInTime(result: Attacked, timeoutMs: number): void {
  assert.equal(result.ok, false);
  const scriptMs = result.ok ? Number.NaN : (result.scriptMs ?? result.elapsedMs);
  const lag = `(timer lag ${result.lagMs} ms)`;
  // The slack scales by the load as well: the timer lag is measured after the run, and on a loaded
  // machine the worker that runs the script waits for a core longer than a timer does (434 ms against
  // 300 at load 21, lag 30).
  assert.ok(scriptMs <= timeoutMs + underLoadMs(100) + result.lagMs, `the script ran ${scriptMs} ms ${lag}`);
  // Preparing the run (a context, the bridge) happens before the start and stays small.
  assert.ok(
    result.elapsedMs <= timeoutMs + underLoadMs(1000) + result.lagMs,
    `the whole run took ${result.elapsedMs} ms ${lag}`,
  );
}

async function assertHealthy(): Promise<void> {
  const result = await pool.run({
    script: `entities.create({ text: "after" }); console.log(typeof process);`,
    input: {},
  });
  assert.equal(result.ok, true, JSON.stringify(result));
  assert.deepEqual(result.logs, [{ level: "log", text: "undefined" }]);
}

before(async () => {
  pool = createSandboxPool({ dispatcherModule, size: 1, memoryLimitMb: 64 });
  await pool.run({ script: "", input: {} });
});
after(async () => {
  await pool.close();
  rmSync(directory, { recursive: true, force: true });
});

describe("sandbox escape suite: globals, constructor chains and stack traces", () => {
  test("the script sees no host globals and no raw-memory or wasm globals", async () => {
    const result = await attack(`
      const names = ["process", "require", "module", "Buffer", "setTimeout", "queueMicrotask", "fetch", "globalThis.process",
        "ArrayBuffer", "SharedArrayBuffer", "Atomics", "WebAssembly", "DataView", "Uint8Array", "Float64Array", "BigInt64Array"];
      console.log(names.map((name) => typeof globalThis[name]).join(","));
      console.log(Object.getPrototypeOf(globalThis) === null ? "null-proto" : "proto");
    `);
    assert.equal(result.ok, true, JSON.stringify(result));
    assert.equal(result.logs[0]?.text, Array(16).fill("undefined").join(","));
    assertContained(result, 0);
    await assertHealthy();
  });

  test("constructor chains from every binding, the global and thrown errors stay inside", async () => {
    const result = await attack(`
      for (const binding of [entities, relations, console]) {
        probe("binding", binding);
        for (const name of Object.getOwnPropertyNames(binding)) probe("method " + name, binding[name]);
      }
      probe("global", globalThis);
      for (const method of [entities.list, console.log]) {
        for (const property of ["caller", "arguments"]) {
          try { probe(property, method[property]); } catch (error) { probe(property + " refused", error); }
        }
      }
      entities.create({ get text() { try { probe("getter caller", arguments.callee.caller); } catch (error) { probe("callee refused", error); } return "t"; } });
      probe("list result", entities.list());
      probe("list item", entities.list()[0]);
      probe("created", entities.create({ text: "x" }));
      try { entities.refuse("x"); } catch (error) { probe("refused write", error); probe("refused data", error.data); }
      try { entities.create(() => 1); } catch (error) { probe("bad argument", error); }
      try { null.field; } catch (error) { probe("type error", error); }
      const pending = entities.materialize("n1");
      probe("promise", pending);
      probe("materialized", await pending);
      try { await entities.materialize("missing"); } catch (error) { probe("async refusal", error); }
      try { entities.create({ text: 1n }); } catch (error) { probe("bigint", error); }
    `);
    assert.equal(result.ok, true, JSON.stringify(result));
    assertContained(result, 20);
    await assertHealthy();
  });

  test("Error.prepareStackTrace never hands out a worker frame's function or receiver", async () => {
    const result = await attack(`
      const seen = [];
      Error.prepareStackTrace = (error, frames) => {
        for (const frame of frames) {
          try { const fn = frame.getFunction(); if (fn) seen.push(fn); } catch (_) {}
          try { const self = frame.getThis(); if (self) seen.push(self); } catch (_) {}
        }
        return "trace";
      };
      const getterArgument = { get text() { new Error("inside stringify").stack; return "t"; } };
      entities.create(getterArgument);
      console.log({ toJSON() { new Error("inside console").stack; return 1; } });
      try { entities.refuse({ toJSON() { throw new Error("thrown from toJSON"); } }); } catch (error) { error.stack; probe("toJSON error", error); }
      Object.defineProperty(Object.prototype, "then", { configurable: true, get() { new Error("inside settle").stack; return undefined; } });
      await entities.materialize("n1");
      delete Object.prototype.then;
      for (const value of seen) probe("frame", value);
      console.log("frames " + seen.length);
    `);
    assert.equal(result.ok, true, JSON.stringify(result));
    assertContained(result);
    await assertHealthy();
  });
});

describe("sandbox escape suite: Proxy tricks, async errors and compilers", () => {
  test("Proxy, Promise-species and Symbol tricks stay inside", async () => {
    const result = await attack(`
      const trapped = [];
      const handler = new Proxy({}, { get(_target, trap) { return (...args) => { trapped.push(...args); return Reflect[trap](...args); }; } });
      entities.create(new Proxy({ text: "p" }, handler));
      try { console.log(new Proxy({}, handler)); } catch (_) {}
      for (const value of trapped.slice(0, 40)) probe("trap argument", value);
      class Species extends Promise { static get [Symbol.species]() { probe("species", this); return Promise; } }
      Object.defineProperty(Promise, Symbol.species, { get() { probe("promise species", this); return Species; } });
      Promise.prototype.then = function (resolve, reject) { probe("then resolve", resolve); probe("then reject", reject); };
      const pending = entities.materialize("n1");
      pending.constructor = Species;
      Object.defineProperty(Error, Symbol.hasInstance, { value: (value) => { probe("hasInstance", value); return false; } });
      Array.prototype[Symbol.iterator] = function* () { probe("iterator", this); };
      console.log("a", "b");
      try { entities.refuse(); } catch (error) { probe("refused after tampering", error); }
      const symbols = [Symbol.for("nodejs.util.inspect.custom"), Symbol.for("nodejs.worker_threads.kTransfer")];
      entities.create({ text: "s", [symbols[0]]: (depth, options, inspect) => probe("inspect", inspect) });
      try { console.log = undefined; } catch (error) { probe("frozen console", error); }
      try { globalThis.console = { log() {} }; } catch (error) { probe("fixed console", error); }
      return { then(resolve, reject) { probe("returned thenable", resolve); reportProbes(); resolve(); } };
    `);
    assert.equal(result.ok, true, JSON.stringify(result));
    assertContained(result, 8);
    await assertHealthy();
  });

  test("async errors and unhandled rejections end the run as script errors, reachable by nothing", async () => {
    const thrown = await attack(`
      await entities.materialize("n1");
      throw { then: undefined, constructor: 1 };
    `);
    assert.equal(thrown.ok, false);
    assertContained(thrown, 0);
    const unhandled = await attack(`entities.materialize("missing"); await entities.materialize("n1");`);
    assert.equal(unhandled.ok, false);
    assert.equal(unhandled.ok === false && unhandled.error.code, "unhandled_rejection");
    assertContained(unhandled, 0);
    const caught = await attack(`
      try { await entities.materialize("missing"); } catch (error) { probe("awaited failure", error); console.log(error.code); }
    `);
    assert.equal(caught.ok, true, JSON.stringify(caught));
    assert.ok(caught.logs.some((line) => line.text === "not_found"));
    assertContained(caught);
    await assertHealthy();
  });

  test("eval, Function, generator and async constructors and import() compile nothing", async () => {
    const result = await attack(`
      const attempts = {
        eval: () => eval("1 + 1"),
        indirectEval: () => (0, eval)("1 + 1"),
        Function: () => Function("return 1")(),
        constructorOfArrow: () => (() => 1).constructor("return 1")(),
        generator: () => (function* () {}).constructor("yield 1")().next(),
        async: () => (async () => {}).constructor("return 1")(),
      };
      for (const [name, attempt] of Object.entries(attempts)) {
        try { attempt(); console.log("compiled " + name); } catch (error) { console.log(error.name); probe(name, error); }
      }
      try { await import("node:fs"); console.log("imported"); } catch (error) { console.log(error.message); probe("import", error); }
      try { await import("data:text/javascript,export default 1"); console.log("imported"); } catch (error) { probe("import data", error); }
    `);
    assert.equal(result.ok, true, JSON.stringify(result));
    const lines = result.logs.map((line) => line.text);
    assert.ok(!lines.some((line) => line.startsWith("compiled") || line === "imported"), lines.join("\n"));
    assert.equal(lines.filter((line) => line === "EvalError").length, 6);
    assert.ok(lines.includes("import() is not available in an edit script"));
    assertContained(result, 8);
    await assertHealthy();
  });
});

describe("sandbox escape suite: timeouts and memory bombs", () => {
  test("an infinite loop ends at its timeout", async () => {
    const result = await attack(`console.log("before the loop"); while (true) {}`, 300);
    assert.equal(result.ok === false && result.error.code, "timeout");
    assert.deepEqual(
      result.logs.map((line) => line.text),
      ["before the loop"],
      "lines logged before the kill still come back",
    );
    assertEndsInTime(result, 300);
    assertContained(result, 0);
    await assertHealthy();
  });

  test("a microtask loop ends at its timeout", async () => {
    const result = await attack(
      `const spin = () => Promise.resolve().then(spin); spin(); await new Promise(() => {});`,
      300,
    );
    assert.equal(result.ok === false && result.error.code, "timeout");
    assertEndsInTime(result, 300);
    await assertHealthy();
  });

  test("a string memory bomb hits the heap ceiling, never the host", async () => {
    const before = process.memoryUsage().heapUsed;
    // Filling the heap is CPU work a loaded machine slows down: the limit scales with the load, so
    // only the heap ceiling can end the run.
    const timeoutMs = underLoadMs(5000);
    const result = await attack(
      `const kept = []; for (let index = 0; ; index++) kept.push("x".repeat(1 << 20) + index);`,
      timeoutMs,
    );
    assert.equal(result.ok === false && result.error.code, "memory_limit", JSON.stringify(result));
    assertEndsInTime(result, timeoutMs);
    assert.ok(process.memoryUsage().heapUsed - before < 64 * 1024 * 1024, "the host heap grew");
    await assertHealthy();
  });

  test("a memory bomb under a generous timeout ends at the heap ceiling; the pool counts the kill and recycles the worker", async () => {
    const ceilingMb = 32;
    // Scaled with the load (filling the heap is CPU work); the ceiling must still end it in half of it.
    const timeoutMs = underLoadMs(20_000);
    const small = createSandboxPool({ dispatcherModule, size: 1, memoryLimitMb: ceilingMb });
    try {
      assert.equal((await small.run({ script: "", input: {} })).ok, true);
      assert.deepEqual(small.stats(), { started: 1, recycled: 0, killed: 0, idle: 1 });
      const started = performance.now();
      const result = await small.run({
        script: `console.log("filling"); const kept = []; for (let index = 0; ; index++) kept.push("x".repeat(1 << 20) + index);`,
        input: {},
        timeoutMs,
      });
      const elapsedMs = performance.now() - started;
      assert.equal(result.ok, false);
      // Only the heap ceiling can end this run: the timeout is far off, and nothing else stops the loop.
      assert.equal(
        result.ok === false && result.error.code,
        "memory_limit",
        JSON.stringify(result.ok || result.error),
      );
      assert.match(
        result.ok === false ? result.error.message : "",
        new RegExp(`${ceilingMb} MB heap ceiling`),
      );
      assert.ok(elapsedMs < timeoutMs / 2, `the heap ceiling took ${elapsedMs} ms to end the run`);
      assert.deepEqual(
        result.logs.map((line) => line.text),
        ["filling"],
        "lines logged before the kill still come back",
      );
      // The killed worker is counted and replaced by a fresh one, which serves the next run.
      assert.equal(small.stats().killed, 1);
      assert.equal(small.stats().recycled, 0);
      assert.equal(small.stats().started, 2);
      const next = await small.run({
        script: `entities.create({ text: "after" }); console.log("served");`,
        input: {},
      });
      assert.equal(next.ok, true, JSON.stringify(next));
      assert.deepEqual(next.logs, [{ level: "log", text: "served" }]);
      assert.deepEqual(small.stats(), { started: 2, recycled: 0, killed: 1, idle: 1 });
    } finally {
      await small.close();
    }
  });
});

describe("sandbox escape suite: crashes, recursion and the pool", () => {
  test("a worker that crashes for another reason is reported crashed, not as a memory kill, and replaced", async () => {
    const crashing = createSandboxPool({
      dispatcherModule: new URL("./fixtures/crash-dispatcher.ts", import.meta.url),
      size: 1,
      memoryLimitMb: 64,
    });
    try {
      const result = await crashing.run({ script: "", input: { crash: true }, timeoutMs: 20_000 });
      assert.equal(result.ok === false && result.error.code, "sandbox_crashed", JSON.stringify(result));
      assert.equal(crashing.stats().killed, 1);
      const next = await crashing.run({ script: "", input: {} });
      assert.deepEqual(next.ok && next.value, { served: true }, JSON.stringify(next));
      assert.equal(crashing.stats().started, 2);
    } finally {
      await crashing.close();
    }
  });

  test("typed arrays cannot be reached for a memory bomb", async () => {
    const result = await attack(`
      try { new Uint8Array(1 << 30); console.log("allocated"); } catch (error) { console.log(error.name); }
      try { new (Object.getPrototypeOf(Int8Array))(); } catch (error) { console.log(error.name); }
    `);
    assert.deepEqual(
      result.logs.slice(0, 2).map((line) => line.text),
      ["ReferenceError", "ReferenceError"],
    );
    await assertHealthy();
  });

  test("deep recursion, also across binding calls at every depth, stays inside", async () => {
    const result = await attack(`
      let attempts = 0;
      function down() {
        try { down(); } catch (error) {
          attempts++;
          try { entities.list(); } catch (inner) { probe("bridge at the limit", inner); }
          try { console.log("deep"); } catch (inner) { probe("console at the limit", inner); }
          probe("overflow", error);
          if (attempts < 300) throw error;
        }
      }
      try { down(); } catch (error) { probe("top", error); }
      const recurse = (depth) => recurse(depth + 1);
      recurse(0);
    `);
    assert.equal(result.ok === false && result.error.code, "script_error", JSON.stringify(result));
    assert.match(result.ok === false ? result.error.message : "", /call stack/);
    assertContained(result, 0);
    await assertHealthy();
  });

  test("the pool recycles after a bound number of runs and after every kill", async () => {
    const small = createSandboxPool({ dispatcherModule, size: 1, maxRunsPerWorker: 2 });
    try {
      for (let run = 0; run < 4; run++) assert.equal((await small.run({ script: "", input: {} })).ok, true);
      assert.equal(small.stats().recycled, 2);
      await small.run({ script: "while (true) {}", input: {}, timeoutMs: 50 });
      assert.equal(small.stats().killed, 1);
      assert.equal((await small.run({ script: "console.log(1)", input: {} })).ok, true);
    } finally {
      await small.close();
    }
  });

  test("timeout_ms counts from the script's start, not the worker's boot", async () => {
    const cold = createSandboxPool({ dispatcherModule, size: 0 });
    try {
      // A cold worker boots (loading the dispatcher and the engine) for longer than 30 ms; the script still
      // gets its 30 ms. The engine interprets (its code is still baseline-compiled in a fresh worker): the
      // spin stays well inside 30 ms on a quiet machine; at load 21 it took 103 ms, so the limit scales
      // by the load as the boot does.
      const result = await cold.run({
        script: "let spin = 0; while (spin < 1e4) spin++; console.log('done')",
        input: {},
        timeoutMs: underLoadMs(30),
      });
      assert.equal(result.ok, true, JSON.stringify(result));
    } finally {
      await cold.close();
    }
  });

  test("a worker never sees the host's environment", async () => {
    process.env.DOCSCRIPT_SECRET_FOR_TEST = "secret";
    const envModule = new URL("./fixtures/env-dispatcher.ts", import.meta.url);
    const envPool = createSandboxPool({ dispatcherModule: envModule, size: 0 });
    try {
      const result = await envPool.run({ script: "", input: {} });
      assert.deepEqual(result.ok && result.value, { environmentKeys: 0 });
    } finally {
      delete process.env.DOCSCRIPT_SECRET_FOR_TEST;
      await envPool.close();
    }
  });
});
