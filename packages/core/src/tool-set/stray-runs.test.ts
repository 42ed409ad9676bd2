import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { z } from "zod";
import { ToolError } from "../errors/tool-error.ts";
import { defineTool } from "../tool/define-tool.ts";
import type { Logger } from "../tool/logger.ts";
import { createToolSet } from "./create-tool-set.ts";

/** A tool that never looks at its signal: each run waits for `release()`, counting the runs started and going. */
function deafTool(name = "deaf") {
  const state = { started: 0, running: 0 };
  let gate = Promise.withResolvers<void>();
  const tool = defineTool({
    name,
    description: "Waits for its gate and ignores its signal.",
    input: z.object({}),
    execute: async () => {
      state.started += 1;
      state.running += 1;
      try {
        await gate.promise;
        return "done";
      } finally {
        state.running -= 1;
      }
    },
  });
  const release = async () => {
    gate.resolve();
    gate = Promise.withResolvers<void>();
    // The settled runs' counts are given back on their own turns of the event loop.
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { tool, state, release };
}

/** A tool that stops when its signal aborts. */
const polite = defineTool({
  name: "polite",
  description: "Waits until its signal aborts.",
  input: z.object({}),
  execute: (_input, context) =>
    new Promise((_resolve, reject) => {
      context.signal.addEventListener("abort", () => reject(context.signal.reason), { once: true });
    }),
});

function recordingLogger(): Logger & { readonly warnings: Record<string, unknown>[] } {
  const warnings: Record<string, unknown>[] = [];
  const ignore = () => {};
  return {
    debug: ignore,
    info: ignore,
    error: ignore,
    warn: (_m, fields) => warnings.push(fields ?? {}),
    warnings,
  };
}

describe("createToolSet: runs that outlive their calls", () => {
  it("refuses a tool's new calls once 64 of its runs outlived a cancel, until one ends", async () => {
    const { tool, state, release } = deafTool();
    const logger = recordingLogger();
    const tools = createToolSet([tool], { logger });
    const answers = [];
    // A caller's flood: each call started, then cancelled; the tool runs on after every cancel.
    for (let i = 0; i < 500; i++) {
      const controller = new AbortController();
      const answer = tools.call("deaf", {}, { signal: controller.signal });
      controller.abort();
      answers.push(await answer);
    }
    assert.equal(state.running, 64, "at most 64 runs go on after their calls were cancelled");
    assert.equal(state.started, 64);
    assert.equal(answers.filter((answer) => !answer.ok && answer.error.code === "aborted").length, 64);
    const refused = answers.filter((answer) => !answer.ok && answer.error.code === "overloaded");
    assert.equal(refused.length, 436);
    const refusal = refused[0]!;
    assert.ok(!refusal.ok);
    assert.equal(refusal.error.retryable, true);
    assert.deepEqual(refusal.error.data, { tool: "deaf", strayRuns: 64, maxStrayRuns: 64 });
    assert.match(refusal.error.message, /64 runs still going after their calls ended/);
    // Two warnings for the whole flood: when the tool first ran on, and when it filled its bound.
    assert.deepEqual(
      logger.warnings.map((fields) => fields.strayRuns),
      [1, 64],
    );

    await release();
    assert.equal(state.running, 0);
    const again = tools.call("deaf", {});
    assert.equal(state.started, 65, "a call runs again once the stray runs ended");
    await release();
    assert.deepEqual(await again, { ok: true, output: "done" });
  });

  it("counts runs that outlived their deadline the same way", async () => {
    const { tool, state, release } = deafTool();
    const tools = createToolSet([tool], { maxStrayRuns: 3, timeoutMs: 1 });
    const codes = [];
    for (let i = 0; i < 10; i++) {
      const answer = await tools.call("deaf", {});
      codes.push(answer.ok ? "ok" : answer.error.code);
    }
    assert.deepEqual(codes, ["timeout", "timeout", "timeout", ...Array(7).fill("overloaded")]);
    assert.equal(state.started, 3);
    await release();
    assert.equal((await tools.call("deaf", {})).ok, false);
    assert.equal(state.started, 4);
    await release();
  });

  it("bounds each tool on its own: another tool of the set still runs", async () => {
    const deaf = deafTool();
    const other = deafTool("other");
    const tools = createToolSet([deaf.tool, other.tool, polite], { maxStrayRuns: 2, timeoutMs: 1 });
    for (let i = 0; i < 5; i++) await tools.call("deaf", {});
    assert.equal(deaf.state.started, 2);
    const answer = await tools.call("other", {}, { calledAs: "demo.other" });
    assert.ok(!answer.ok);
    assert.equal(answer.error.code, "timeout");
    assert.equal(other.state.started, 1);
    await deaf.release();
    await other.release();
  });

  it("never refuses a tool that stops when its signal aborts", async () => {
    const tools = createToolSet([polite], { maxStrayRuns: 1 });
    for (let i = 0; i < 200; i++) {
      const controller = new AbortController();
      const answer = tools.call("polite", {}, { signal: controller.signal, timeoutMs: i % 2 === 0 ? 0 : 1 });
      if (i % 2 === 0) controller.abort();
      const result = await answer;
      assert.ok(!result.ok);
      assert.ok(result.error.code === "aborted" || result.error.code === "timeout", result.error.code);
    }
  });

  it("names the tool as its caller called it in the refusal", async () => {
    const { tool, release } = deafTool();
    const tools = createToolSet([tool], { maxStrayRuns: 1, timeoutMs: 1 });
    await tools.call("deaf", {});
    const answer = await tools.call("deaf", {}, { calledAs: "demo.deaf" });
    assert.ok(!answer.ok);
    assert.equal(answer.error.code, "overloaded");
    assert.match(answer.error.message, /Tool "demo\.deaf"/);
    await release();
  });

  it("takes Infinity for no bound and refuses a bound that is not a whole number of at least 1", async () => {
    const { tool, state, release } = deafTool();
    const tools = createToolSet([tool], { maxStrayRuns: Number.POSITIVE_INFINITY, timeoutMs: 1 });
    for (let i = 0; i < 100; i++) await tools.call("deaf", {});
    assert.equal(state.started, 100);
    await release();
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      assert.throws(
        () => createToolSet([tool], { maxStrayRuns: bad }),
        (error: unknown) => ToolError.isInstance(error) && error.code === "invalid_max_stray_runs",
      );
    }
  });
});
