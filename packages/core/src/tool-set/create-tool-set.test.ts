import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { z } from "zod";
import { controlFlowBrand } from "../errors/control-flow.ts";
import { InvalidInputError } from "../errors/invalid-input-error.ts";
import { ToolDefinitionError } from "../errors/tool-definition-error.ts";
import { ToolError } from "../errors/tool-error.ts";
import { defineTool } from "../tool/define-tool.ts";
import { createToolSet } from "./create-tool-set.ts";

const add = defineTool({
  name: "math.add",
  description: "Adds two numbers.",
  input: z.object({ a: z.number(), b: z.number() }),
  output: z.number(),
  execute: ({ a, b }) => a + b,
});

describe("createToolSet: definitions and names", () => {
  it("calls a tool with validated input", async () => {
    const tools = createToolSet([add]);
    assert.deepEqual(await tools.call("math.add", { a: 2, b: 3 }), { ok: true, output: 5 });
    assert.equal(await tools.invoke("math.add", { a: 1, b: 1 }), 2);
  });

  it("refuses a duplicate name, naming both definitions", () => {
    const again = defineTool({ ...add, source: undefined as never, execute: () => 0 });
    assert.throws(
      () => createToolSet([add, again]),
      (error: unknown) => {
        assert.ok(ToolDefinitionError.isInstance(error));
        assert.equal(error.code, "duplicate_tool");
        const sources = (error.data as { sources: string[] }).sources;
        assert.equal(sources.length, 2);
        assert.match(sources[0]!, /create-tool-set\.test\.ts:\d+/);
        assert.match(sources[1]!, /create-tool-set\.test\.ts:\d+/);
        assert.notEqual(sources[0], sources[1]);
        assert.match(error.message, new RegExp(`${sources[0]}.*${sources[1]}`));
        return true;
      },
    );
  });

  it("validates tool names at definition time", () => {
    for (const name of ["", "has space", "a/b", "x".repeat(129)]) {
      assert.throws(
        () => defineTool({ name, description: "", input: z.object({}), execute: () => null }),
        (error: unknown) =>
          ToolDefinitionError.isInstance(error) &&
          !ToolError.isInstance(error) &&
          error.code === "invalid_tool_definition",
      );
    }
  });

  it("gives reversible model-safe names, hashing long ones", () => {
    const long = defineTool({
      name: `m.${"x".repeat(100)}`,
      description: "",
      input: z.object({}),
      execute: () => 1,
    });
    const tools = createToolSet([add, long]);
    assert.equal(tools.llmName("math.add"), "math__add");
    assert.equal(tools.fromLlmName("math__add"), "math.add");
    const longName = tools.llmName(long.name);
    assert.match(longName, /^[A-Za-z0-9_-]{1,64}$/);
    assert.equal(tools.fromLlmName(longName), long.name);
  });

  it("refuses names whose model-safe forms collide", () => {
    const dotted = defineTool({ name: "a.b", description: "", input: z.object({}), execute: () => 1 });
    const underscored = defineTool({ name: "a__b", description: "", input: z.object({}), execute: () => 1 });
    assert.throws(() => createToolSet([dotted, underscored]), /maps to the model name "a__b"/);
  });
});

describe("createToolSet: what a refused call answers", () => {
  it("returns invalid input as issues with paths, never a stack", async () => {
    const tools = createToolSet([add]);
    // @ts-expect-error: the typed set refuses a string for a number at compile time; the call checks again
    const result = await tools.call("math.add", { a: "two" });
    assert.equal(result.ok, false);
    if (result.ok) return;
    assert.ok(InvalidInputError.isInstance(result.error));
    const wire = JSON.parse(JSON.stringify(result.error));
    assert.equal(wire.code, "invalid_input");
    assert.deepEqual(
      wire.data.issues.map((issue: { path: unknown[] }) => issue.path),
      [["a"], ["b"]],
    );
    assert.equal(typeof wire.data.issues[0].message, "string");
    assert.equal(wire.stack, undefined);
    assert.doesNotMatch(JSON.stringify(wire), /at .*\.ts:\d+/);
  });

  it("names the tool in its errors as the caller called it, when a host passes calledAs", async () => {
    const tools = createToolSet([add]);
    // @ts-expect-error: the typed set refuses a string for a number at compile time; the call checks again
    const qualified = await tools.call("math.add", { a: "two", b: 1 }, { calledAs: "node.math.add" });
    assert.ok(!qualified.ok);
    assert.match(qualified.error.message, /^Invalid input for tool "node\.math\.add"/);
    assert.equal((qualified.error.data as { tool: string }).tool, "node.math.add");
    const slow = defineTool({
      name: "slow",
      description: "",
      input: z.object({}),
      execute: () => new Promise(() => {}),
    });
    const timedOut = await createToolSet([slow]).call("slow", {}, { calledAs: "demo.slow", timeoutMs: 20 });
    assert.ok(!timedOut.ok);
    assert.equal(timedOut.error.code, "timeout");
    assert.deepEqual(timedOut.error.data, { tool: "demo.slow", timeoutMs: 20 });
    // Without it, the set's own name.
    // @ts-expect-error: as above
    const bare = await tools.call("math.add", { a: "two", b: 1 });
    assert.equal(!bare.ok && (bare.error.data as { tool: string }).tool, "math.add");
  });

  it("answers an unknown tool with the names that exist", async () => {
    // @ts-expect-error: the typed set refuses an unknown name at compile time; the call answers it too
    const result = await createToolSet([add]).call("math.sub", {});
    assert.equal(result.ok, false);
    if (!result.ok) {
      assert.equal(result.error.code, "unknown_tool");
      assert.deepEqual((result.error.data as { available: string[] }).available, ["math.add"]);
    }
  });
});

describe("createToolSet: deadlines", () => {
  it("ends a tool that exceeds its timeout with a timeout error, even if it ignores its signal", async () => {
    let sawAbort = false;
    const slow = defineTool({
      name: "slow",
      description: "",
      input: z.object({}),
      timeoutMs: 50,
      execute: (_input, context) =>
        new Promise((resolve) => {
          context.signal.addEventListener("abort", () => {
            sawAbort = true;
          });
          setTimeout(resolve, 2000).unref();
        }),
    });
    const started = Date.now();
    const result = await createToolSet([slow]).call("slow", {});
    assert.ok(Date.now() - started < 1000);
    assert.equal(result.ok, false);
    if (!result.ok) {
      assert.equal(result.error.code, "timeout");
      assert.equal(result.error.retryable, true);
    }
    assert.equal(sawAbort, true);
  });

  it("keeps a time limit longer than one timer holds (2^31 ms and more) instead of ending at 1 ms", async () => {
    const steady = defineTool({
      name: "steady",
      description: "",
      input: z.object({}),
      execute: () => new Promise((resolve) => setTimeout(() => resolve("done"), 20)),
    });
    const tools = createToolSet([steady]);
    for (const timeoutMs of [2 ** 31, 30 * 24 * 3_600_000]) {
      assert.deepEqual(
        await tools.call("steady", {}, { timeoutMs }),
        { ok: true, output: "done" },
        `${timeoutMs}`,
      );
    }
  });

  it("still ends a call at a time limit past one timer's longest wait, waited in steps", async (t) => {
    t.mock.timers.enable({ apis: ["setTimeout"] });
    const hang = defineTool({
      name: "hang",
      description: "",
      input: z.object({}),
      execute: () => new Promise(() => {}),
    });
    const longest = 2 ** 31 - 1;
    let answer: unknown;
    void createToolSet([hang])
      .call("hang", {}, { timeoutMs: longest + 10 })
      .then((result) => {
        answer = result;
      });
    const settle = async () => {
      for (let turn = 0; turn < 20; turn++) await Promise.resolve();
    };
    t.mock.timers.tick(longest);
    await settle();
    assert.equal(answer, undefined, "not over after the first step");
    t.mock.timers.tick(10);
    await settle();
    assert.equal((answer as { error?: { code: string } } | undefined)?.error?.code, "timeout");
  });

  it("answers a spent limit (negative, NaN) timeout without running the tool; 0 and Infinity mean none", async () => {
    let runs = 0;
    const counted = defineTool({
      name: "counted",
      description: "",
      input: z.object({}),
      execute: async () => {
        runs += 1;
        return "ran";
      },
    });
    const tools = createToolSet([counted]);
    for (const timeoutMs of [-1, -0.5, Number.NEGATIVE_INFINITY, Number.NaN]) {
      const answer = await tools.call("counted", {}, { timeoutMs });
      assert.ok(!answer.ok && answer.error.code === "timeout", `${timeoutMs}`);
    }
    assert.equal(runs, 0, "the tool never ran on a spent limit");
    assert.equal((await createToolSet([counted], { timeoutMs: -5 }).call("counted", {})).ok, false);
    for (const timeoutMs of [0, Number.POSITIVE_INFINITY]) {
      assert.deepEqual(await tools.call("counted", {}, { timeoutMs }), { ok: true, output: "ran" });
    }
    assert.equal(runs, 2);
  });
});

describe("createToolSet: signals and outputs", () => {
  it("aborts when the caller's signal fires", async () => {
    const hang = defineTool({
      name: "hang",
      description: "",
      input: z.object({}),
      execute: () => new Promise(() => {}),
    });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 20);
    const result = await createToolSet([hang]).call("hang", {}, { signal: controller.signal });
    assert.equal(result.ok, false);
    if (!result.ok) assert.equal(result.error.code, "aborted");
  });

  it("validates output when a schema is given", async () => {
    const liar = defineTool({
      name: "liar",
      description: "",
      input: z.object({}),
      output: z.object({ n: z.number() }),
      execute: () => ({ n: "not a number" }) as never,
    });
    const result = await createToolSet([liar]).call("liar", {});
    assert.equal(result.ok, false);
    if (!result.ok) assert.equal(result.error.code, "invalid_output");
    // The same check for a tool that answers later (a synchronous answer skips the deadline race).
    const slowLiar = defineTool({
      ...liar,
      name: "slow_liar",
      execute: async () => ({ n: "late" }) as never,
    });
    const honest = defineTool({ ...liar, name: "honest", execute: async () => ({ n: 1 }) });
    const tools = createToolSet([slowLiar, honest]);
    const late = await tools.call("slow_liar", {});
    assert.ok(!late.ok && late.error.code === "invalid_output");
    assert.deepEqual(await tools.call("honest", {}), { ok: true, output: { n: 1 } });
  });

  it("wraps a thrown error as tool_failed and keeps a ToolError's code", async () => {
    const failing = defineTool({
      name: "failing",
      description: "",
      input: z.object({ coded: z.boolean() }),
      execute: ({ coded }) => {
        if (coded) throw new ToolError("not_found", "no such order", { data: { id: 7 } });
        throw new Error("boom");
      },
    });
    const tools = createToolSet([failing]);
    const plain = await tools.call("failing", { coded: false });
    const coded = await tools.call("failing", { coded: true });
    assert.ok(!plain.ok && plain.error.code === "tool_failed" && /boom/.test(plain.error.message));
    assert.ok(!coded.ok && coded.error.code === "not_found");
    assert.deepEqual(!coded.ok && coded.error.toJSON(), {
      code: "not_found",
      message: "no such order",
      retryable: false,
      data: { id: 7 },
    });
  });
});

describe("createToolSet: what the handler sees", () => {
  it("lets a control-flow throw (an interrupt) pass through untouched", async () => {
    const pause = Object.assign(new Error("paused"), { [controlFlowBrand]: true });
    const pausing = defineTool({
      name: "pausing",
      description: "",
      input: z.object({}),
      execute: () => {
        throw pause;
      },
    });
    await assert.rejects(createToolSet([pausing]).call("pausing", {}), (error) => error === pause);
  });

  it("hands the handler its context", async () => {
    const seen = defineTool({
      name: "seen",
      description: "",
      input: z.object({}),
      execute: (_input, context) => ({
        callId: context.callId,
        key: context.idempotencyKey,
        tenant: context.identity?.tenant,
      }),
    });
    const result = await createToolSet([seen]).invoke(
      "seen",
      {},
      { callId: "c1", identity: { tenant: "t1" } },
    );
    assert.deepEqual(result, { callId: "c1", key: "c1", tenant: "t1" });
  });

  it("on a takeover asks recover first: a landed effect answers, else execute runs; never otherwise", async () => {
    const store = new Map<string, number>();
    const asked: string[] = [];
    const charge = defineTool({
      name: "charge",
      description: "",
      input: z.object({ cents: z.number() }),
      output: z.object({ charged: z.number(), takeover: z.string().optional() }),
      execute: ({ cents }, context) => {
        store.set(context.idempotencyKey, cents);
        return { charged: cents, ...(context.takeover ? { takeover: context.takeover.node } : {}) };
      },
      recover: (_input, context) => {
        asked.push(context.idempotencyKey);
        const cents = store.get(context.idempotencyKey);
        return cents === undefined ? { landed: false } : { landed: true, output: { charged: cents } };
      },
    });
    const tools = createToolSet([charge]);
    const takeover = { node: "node-a", startedAt: new Date(0).toISOString() };
    // Not a takeover: recover is never asked, even when the key's effect is there.
    assert.deepEqual(await tools.invoke("charge", { cents: 5 }, { idempotencyKey: "k1" }), { charged: 5 });
    assert.deepEqual(asked, []);
    // A takeover whose effect landed: the earlier outcome, no second effect.
    store.set("k1", 7);
    assert.deepEqual(await tools.invoke("charge", { cents: 5 }, { idempotencyKey: "k1", takeover }), {
      charged: 7,
    });
    assert.equal(store.get("k1"), 7);
    // A takeover whose effect did not land: execute runs, and sees the takeover.
    assert.deepEqual(await tools.invoke("charge", { cents: 3 }, { idempotencyKey: "k2", takeover }), {
      charged: 3,
      takeover: "node-a",
    });
    assert.deepEqual(asked, ["k1", "k2"]);
    // What recover answers is checked like any output.
    store.set("k3", Number.NaN);
    const bad = await tools.call("charge", { cents: 1 }, { idempotencyKey: "k3", takeover });
    assert.equal(!bad.ok && bad.error.code, "invalid_output");
  });

  it("tells the handler whether anyone receives its progress, and hands reports to whoever does", async () => {
    const reporter = defineTool({
      name: "reporter",
      description: "",
      input: z.object({}),
      execute: (_input, context) => {
        context.progress(1, 2, "half");
        return { wanted: context.progressWanted };
      },
    });
    const tools = createToolSet([reporter]);
    assert.deepEqual(await tools.invoke("reporter", {}), { wanted: false });
    const reports: unknown[] = [];
    assert.deepEqual(await tools.invoke("reporter", {}, { onProgress: (update) => reports.push(update) }), {
      wanted: true,
    });
    assert.deepEqual(reports, [{ progress: 1, total: 2, message: "half" }]);
  });

  it("derives JSON Schema once, at definition, keeping its 2020-12 dialect tag", () => {
    assert.deepEqual(add.inputJsonSchema, {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"],
    });
  });
});
