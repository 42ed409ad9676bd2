/**
 * What a script can reach, and whose it is. The enumeration walks, from inside the engine, every object
 * and callable reachable from the global (own properties, accessors, symbols, prototypes) and compares
 * it with the same walk in a pristine QuickJS context that no host ever touched: what a run has beyond
 * the language's own built-ins must be exactly the documented script API. The capability tests show that
 * every call names its run, that the host refuses calls of ended or other runs, and that adversarial
 * arguments to every binding come back as refusals the script can read.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import variant from "@jitl/quickjs-ng-wasmfile-release-sync";
import {
  DefaultIntrinsics,
  newQuickJSWASMModuleFromVariant,
  type QuickJSSyncVariant,
} from "quickjs-emscripten-core";
import { scriptGlobals } from "../tool/script-contract.ts";
import { createSandboxPool, type SandboxPool } from "./create-sandbox-pool.ts";
import { createRunGate } from "./run-gate.ts";
import type { SandboxDispatcher } from "./sandbox-protocol.ts";

const dispatcherModule = new URL("./fixtures/toy-dispatcher.ts", import.meta.url);

/** Breadth-first over everything reachable from the global; each object once, at its first path. */
const walker = `(() => {
  const toSource = (fn) => { try { return Reflect.apply(Function.prototype.toString, fn, []).replace(/s+/g, " "); } catch (_) { return "?"; } };
  const seen = new Map();
  const callables = [];
  const queue = [[globalThis, "globalThis"]];
  const note = (value, path) => {
    if ((typeof value !== "object" && typeof value !== "function") || value === null) return;
    if (seen.has(value)) return;
    seen.set(value, path);
    if (typeof value === "function") callables.push(path + " = " + toSource(value));
    queue.push([value, path]);
  };
  seen.set(globalThis, "globalThis");
  while (queue.length > 0) {
    const [value, path] = queue.shift();
    note(Object.getPrototypeOf(value), path + ".[[Prototype]]");
    for (const key of Reflect.ownKeys(value)) {
      const name = typeof key === "symbol" ? "[" + key.description + "]" : key;
      const descriptor = Reflect.getOwnPropertyDescriptor(value, key);
      if (descriptor === undefined) continue;
      if ("value" in descriptor) note(descriptor.value, path + "." + name);
      if (descriptor.get) note(descriptor.get, path + "." + name + ".get");
      if (descriptor.set) note(descriptor.set, path + "." + name + ".set");
    }
  }
  return JSON.stringify({ globals: Reflect.ownKeys(globalThis).map(String), callables, objects: seen.size });
})()`;

interface Walk {
  readonly globals: string[];
  readonly callables: string[];
  readonly objects: number;
}

async function pristineWalk(): Promise<Walk> {
  const engine = await newQuickJSWASMModuleFromVariant(variant as unknown as QuickJSSyncVariant);
  const runtime = engine.newRuntime();
  const context = runtime.newContext({ intrinsics: { ...DefaultIntrinsics, TypedArrays: false } });
  try {
    const result = context.unwrapResult(context.evalCode(walker));
    const text = context.getString(result);
    result.dispose();
    return JSON.parse(text) as Walk;
  } finally {
    context.dispose();
    runtime.dispose();
  }
}

let pool: SandboxPool;
before(async () => {
  pool = createSandboxPool({ dispatcherModule, size: 1, memoryLimitMb: 64 });
  await pool.run({ script: "", input: {} });
});
after(async () => await pool.close());

describe("what a script reaches", () => {
  test("every global and callable beyond the language's own built-ins is the documented script API", async () => {
    const result = await pool.run({
      script: `entities.create({ text: ${walker} });`,
      input: { notes: [] },
    });
    assert.equal(result.ok, true, JSON.stringify(result));
    const walked = JSON.parse(
      (result.ok && (result.value as { notes: { text: string }[] }).notes[0]?.text) || "{}",
    ) as Walk;
    const pristine = await pristineWalk();

    // The globals are exactly the documented ones: the language's built-ins and the three bindings.
    assert.deepEqual([...walked.globals].sort(), [...scriptGlobals, "Symbol(Symbol.toStringTag)"].sort());
    for (const absent of [
      "FinalizationRegistry",
      "WeakRef",
      "queueMicrotask",
      "setTimeout",
      "setInterval",
      "setImmediate",
      "process",
      "require",
      "WebAssembly",
      "SharedArrayBuffer",
      "Atomics",
      "ArrayBuffer",
    ])
      assert.ok(!walked.globals.includes(absent), `${absent} is reachable`);

    // Each callable as its path and its source text: a function replaced at the same path counts too.
    const pristineSet = new Set(pristine.callables);
    const runSet = new Set(walked.callables);
    const pathOf = (entry: string) => entry.slice(0, entry.indexOf(" = "));
    const added = walked.callables
      .filter((entry) => !pristineSet.has(entry))
      .map(pathOf)
      .sort();
    const removed = pristine.callables
      .filter((entry) => !runSet.has(entry))
      .map(pathOf)
      .sort();
    // What the run adds: the bindings' methods, and the stand-ins that refuse compiling strings and
    // stack-trace hooks (each throws or does nothing, and lives in the engine).
    const bindings = [
      ...["list", "get", "create", "refuse", "materialize"].map((method) => `globalThis.entities.${method}`),
      ...["list", "link"].map((method) => `globalThis.relations.${method}`),
      ...["log", "info", "warn", "error", "debug"].map((method) => `globalThis.console.${method}`),
    ];
    assert.deepEqual(
      added,
      [
        ...bindings,
        "globalThis.Error.prepareStackTrace.get",
        "globalThis.Error.prepareStackTrace.set",
        "globalThis.Function",
        "globalThis.eval",
      ].sort(),
    );
    // What the run lacks: the language's code compilers, its stack-trace hook and its microtask scheduler.
    assert.deepEqual(
      removed,
      [
        "globalThis.Error.prepareStackTrace.get",
        "globalThis.Error.prepareStackTrace.set",
        "globalThis.Function",
        "globalThis.eval",
        "globalThis.queueMicrotask",
      ].sort(),
    );
  });

  test("the script's stand-ins for compilers refuse, and nothing outlives the run", async () => {
    const first = await pool.run({
      script: `
        globalThis.leftBehind = () => entities.create({ text: "from an ended run" });
        Object.prototype.leaked = "the first run's prototype";
        console.log(typeof FinalizationRegistry, typeof WeakRef, typeof queueMicrotask, typeof setTimeout);
      `,
      input: { notes: [] },
    });
    assert.deepEqual(
      first.logs.map((line) => line.text),
      ["undefined undefined undefined undefined"],
    );
    const second = await pool.run({
      script: `console.log(typeof globalThis.leftBehind, typeof ({}).leaked);`,
      input: { notes: [] },
    });
    assert.deepEqual(
      second.logs.map((line) => line.text),
      ["undefined undefined"],
      "a run saw what the last one left",
    );
  });
});

describe("one run, one capability: the gate", () => {
  const calls: string[] = [];
  const dispatcher: SandboxDispatcher = {
    call(binding, method, args) {
      calls.push(`${binding}.${method}`);
      return { echoed: args };
    },
    async callAsync(binding, method) {
      calls.push(`${binding}.${method}`);
      return "later";
    },
    finish: () => null,
  };
  const surface = { entities: { list: "sync", materialize: "async" } } as const;

  test("the gate refuses another run's capability, an ended run, names off the surface and non-JSON arguments", () => {
    const gate = createRunGate("cap-a", surface, dispatcher);
    const answer = (text: string) => JSON.parse(text) as { ok: boolean; error?: { code: string } };
    assert.equal(answer(gate.call("cap-a", "entities", "list", "[]")).ok, true);
    assert.equal(answer(gate.call("cap-b", "entities", "list", "[]")).error?.code, "capability_refused");
    for (const [binding, method] of [
      ["entities", "constructor"],
      ["constructor", "constructor"],
      ["__proto__", "valueOf"],
      ["entities", "materialize"],
      ["admin", "drop"],
    ] as const)
      assert.equal(
        answer(gate.call("cap-a", binding, method, "[]")).error?.code,
        "unknown_call",
        `${binding}.${method}`,
      );
    assert.equal(answer(gate.call("cap-a", "entities", "list", 42)).error?.code, "invalid_arguments");
    assert.equal(answer(gate.call("cap-a", "entities", "list", "{}")).error?.code, "invalid_arguments");
    assert.equal(answer(gate.call("cap-a", "entities", "list", "not json")).error?.code, "invalid_arguments");
    assert.equal(
      answer(gate.call("cap-a", "entities", "list", '[{"payload":{"__proto__":{"polluted":true}}}]')).error
        ?.code,
      "invalid_arguments",
    );
    assert.equal(
      answer(gate.call("cap-a", "entities", "list", JSON.stringify(["x".repeat(17 * 1024 * 1024)]))).error
        ?.code,
      "arguments_too_large",
    );
    let settled = 0;
    assert.equal(answer(gate.callAsync("cap-a", "entities", "materialize", "[]", () => settled++)).ok, true);
    gate.end();
    assert.equal(answer(gate.call("cap-a", "entities", "list", "[]")).error?.code, "run_ended");
    assert.deepEqual(
      calls,
      ["entities.list", "entities.materialize"],
      "a refused call reached the data source",
    );
    return new Promise<void>((resolve) =>
      setImmediate(() => {
        assert.equal(settled, 0, "an answer reached a run that had ended");
        resolve();
      }),
    );
  });
});

describe("one run, one capability: what the script sends", () => {
  test("adversarial arguments to every binding come back as refusals the script reads, and the run goes on", async () => {
    const adversarial = `[
      () => [undefined],
      () => [null],
      () => [1n],
      () => [Symbol("s")],
      () => [function () {}],
      () => { const cyclic = {}; cyclic.self = cyclic; return [cyclic]; },
      () => [JSON.parse('{"__proto__": {"polluted": true}}')],
      () => [{ get text() { return entities.list().length; } }],
      () => [{ get text() { throw new Error("getter threw"); } }],
      () => [new Proxy({}, { ownKeys() { throw new Error("proxy threw"); } })],
      () => [{ toJSON() { return { text: entities.create({ text: "reentrant" }).id }; } }],
    ]`;
    const result = await pool.run({
      script: `
        const cases = ${adversarial};
        const outcomes = [];
        for (const [binding, methods] of [[entities, ["list", "get", "create", "refuse"]], [relations, ["list", "link"]]]) {
          for (const method of methods) {
            for (const make of cases) {
              try { binding[method](...make()); outcomes.push("ok"); }
              catch (error) { outcomes.push((error && (error.code || error.name)) || "thrown"); }
            }
          }
        }
        for (const make of cases) {
          try { await entities.materialize(...make()); outcomes.push("ok"); }
          catch (error) { outcomes.push((error && (error.code || error.name)) || "thrown"); }
        }
        try { entities.create({ text: new Array(1500000).fill("0123456789") }); outcomes.push("ok"); }
        catch (error) { outcomes.push(error.code); }
        console.log(outcomes.length + " " + [...new Set(outcomes)].sort().join(","));
        console.log(String(({}).polluted));
      `,
      input: { notes: [] },
      onHostCall: async () => "content",
    });
    assert.equal(result.ok, true, JSON.stringify(result).slice(0, 2000));
    const [summary, polluted] = result.logs.map((line) => line.text);
    // Every case of every binding ended in a value or a readable refusal: the run went on to log.
    assert.match(summary ?? "", /^78 .*arguments_too_large/);
    for (const outcome of (summary ?? "").split(" ")[1]!.split(","))
      assert.ok(
        [
          "ok",
          "TypeError",
          "Error",
          "arguments_too_large",
          "invalid_arguments",
          "write_refused",
          "RangeError",
        ].includes(outcome),
        `unexpected outcome ${outcome}`,
      );
    assert.equal(polluted, "undefined");
    const next = await pool.run({ script: `entities.create({ text: "after" });`, input: { notes: [] } });
    assert.equal(next.ok, true);
  });
});

describe("the host acts only on messages that carry the run's capability", () => {
  test("forged host calls and results of another run or capability are refused; the run's own are answered", async () => {
    const forging = createSandboxPool({
      dispatcherModule: new URL("./fixtures/forging-dispatcher.ts", import.meta.url),
      size: 1,
    });
    try {
      const asked: string[] = [];
      for (let runId = 1; runId <= 2; runId++) {
        const result = await forging.run({
          script: "",
          input: { runId },
          onHostCall: async (method) => {
            asked.push(method);
            return "from the host";
          },
        });
        assert.deepEqual(result.ok && result.value, { answered: "from the host" }, JSON.stringify(result));
      }
      assert.deepEqual(asked, ["genuine", "genuine"], "a forged host call reached the host's hooks");
    } finally {
      await forging.close();
    }
  });
});

describe("sync host calls (ADR 0464)", () => {
  const syncDispatcher = new URL("./fixtures/sync-host-dispatcher.ts", import.meta.url);

  test("a binding the host answers returns the host's value, or its refusal with code and data; forged calls reach no hook", async () => {
    const syncPool = createSandboxPool({ dispatcherModule: syncDispatcher, size: 1 });
    try {
      const asked: [string, unknown][] = [];
      for (let runId = 1; runId <= 2; runId++) {
        const result = await syncPool.run({
          script: `console.log(JSON.stringify(entities.get("a")));
try { entities.get("refused"); } catch (error) { console.log(error.name, error.code, JSON.stringify(error.data)); }
console.log(entities.get("b").id);`,
          input: { runId },
          onHostCall: async (method, payload) => {
            asked.push([method, payload]);
            const id = (payload as { id: string }).id;
            if (id === "refused")
              throw Object.assign(new Error("no such row"), {
                code: "not_found",
                data: { issues: [id], resource: "entity", id },
              });
            return { id, run: runId };
          },
        });
        assert.ok(result.ok, JSON.stringify(result));
        assert.deepEqual(
          result.logs.map((line) => line.text),
          [
            `{"id":"a","run":${runId}}`,
            'DocScriptError not_found {"issues":["refused"],"resource":"entity","id":"refused"}',
            "b",
          ],
        );
      }
      assert.deepEqual(
        asked.map(([method]) => method),
        ["get", "get", "get", "get", "get", "get"],
        "a forged sync call reached the host's hook",
      );
    } finally {
      await syncPool.close();
    }
  });

  test("a sync call the host does not answer before the deadline ends the run `timeout`; the pool goes on", async () => {
    const syncPool = createSandboxPool({ dispatcherModule: syncDispatcher, size: 1, timeoutMs: 400 });
    try {
      const started = performance.now();
      const stuck = await syncPool.run({
        script: `entities.get("a");`,
        input: { runId: 1 },
        onHostCall: () => new Promise(() => {}),
      });
      assert.equal(stuck.ok, false);
      assert.equal(!stuck.ok && stuck.error.code, "timeout", JSON.stringify(stuck));
      assert.ok(performance.now() - started < 10_000, "the wait outlived the script's deadline");
      const next = await syncPool.run({
        script: `console.log(entities.get("x").id);`,
        input: { runId: 2 },
        onHostCall: async (_method, payload) => payload,
      });
      assert.ok(next.ok, JSON.stringify(next));
      assert.deepEqual(
        next.logs.map((line) => line.text),
        ["x"],
      );
    } finally {
      await syncPool.close();
    }
  });
});
