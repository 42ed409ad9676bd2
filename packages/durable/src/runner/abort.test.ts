/**
 * `start` and `resume` wait for the run to pause or end, and their signal ends that wait: aborted
 * before, nothing is started or answered; aborted while a step waits on something that never comes,
 * the call rejects with `aborted` within a moment, the run is cancelled and the step's signal aborts.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { ToolAbortedError } from "@tackle/core";
import { createGraph } from "../graph/create-graph.ts";
import { createMemoryStore } from "../stores/memory/memory-store.ts";
import { createRunner } from "./create-runner.ts";

function hangingGraph() {
  const seen = { started: 0, stepAborted: 0 };
  const graph = createGraph<{ asked?: string }>("hang")
    .node("ask", async (_state, ctx) => {
      const asked = await ctx.interrupt<string>({ question: "go?" }, { id: "go" });
      return { asked };
    })
    .node("wait", async (_state, ctx) => {
      await ctx.step("forever", ({ signal }) => {
        seen.started += 1;
        return new Promise<never>((_, reject) => {
          signal.addEventListener("abort", () => {
            seen.stepAborted += 1;
            reject(signal.reason);
          });
        });
      });
    })
    .edge("ask", "wait");
  return { graph, seen };
}

const isAborted = (error: unknown) => {
  assert.ok(ToolAbortedError.isInstance(error), `expected aborted, got ${String(error)}`);
  return true;
};

describe("start and resume honour their abort signal", () => {
  test("aborted before start: no run is started", async () => {
    const { graph } = hangingGraph();
    const runner = createRunner({ store: createMemoryStore(), graphs: [graph] });
    await assert.rejects(runner.start(graph, {}, { threadId: "t", signal: AbortSignal.abort() }), isAborted);
    assert.equal(await runner.get("t"), undefined);
    await runner.close();
  });

  test("aborted before resume: the answer is not recorded and the run stays paused", async () => {
    const { graph, seen } = hangingGraph();
    const runner = createRunner({ store: createMemoryStore(), graphs: [graph] });
    assert.equal((await runner.start(graph, {}, { threadId: "t" })).status, "paused");
    await assert.rejects(runner.resume("t", { go: "yes" }, { signal: AbortSignal.abort() }), isAborted);
    await sleep(50);
    assert.equal((await runner.get("t"))?.status, "paused");
    assert.equal(seen.started, 0);
    await runner.cancel("t");
    await runner.close();
  });

  test("aborted mid-run: resume rejects within a moment, the run is cancelled, the step's signal aborts", async () => {
    const { graph, seen } = hangingGraph();
    const runner = createRunner({ store: createMemoryStore(), graphs: [graph] });
    await runner.start(graph, {}, { threadId: "t" });
    const controller = new AbortController();
    const resumed = runner.resume("t", { go: "yes" }, { signal: controller.signal });
    resumed.catch(() => undefined);
    const deadline = Date.now() + 5000;
    while (seen.started === 0 && Date.now() < deadline) await sleep(10);
    assert.equal(seen.started, 1, "the step is waiting");
    const at = performance.now();
    controller.abort();
    await assert.rejects(resumed, isAborted);
    const elapsed = performance.now() - at;
    // Promptly: the step waits forever unless aborted; the bound is loose enough for a loaded machine.
    assert.ok(elapsed < 1_000, `${Math.round(elapsed)} ms after the abort`);
    assert.equal((await runner.get("t"))?.status, "cancelled");
    assert.equal(seen.stepAborted, 1, "the step's signal aborted");
    await runner.close();
  });
});
