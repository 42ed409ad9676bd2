import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { DurableError } from "../errors/durable-error.ts";
import { createGraph } from "../graph/create-graph.ts";
import { createMemoryStore } from "../stores/memory/memory-store.ts";
import { createRunner } from "./create-runner.ts";

describe("the driver's lease", () => {
  test("a bare resume never takes over a run whose driver is alive, even inside a long step", async () => {
    const store = createMemoryStore();
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let runs = 0;
    const graph = createGraph("long").node("a", async (_state, ctx) => {
      await ctx.step("slow", async () => {
        runs++;
        await gate;
      });
    });
    const driver = createRunner({ store, graphs: [graph], leaseMs: 150 });
    const other = createRunner({ store, graphs: [graph], leaseMs: 150 });
    const launched = await driver.launch(graph, {}, { threadId: "t" });
    await sleep(400); // well past the lease: only the heartbeat keeps the run vouched for
    await assert.rejects(
      other.resume("t"),
      (error) => DurableError.isInstance(error) && error.code === "run_active" && error.retryable,
    );
    release();
    assert.equal((await launched.finished).status, "completed");
    assert.equal(runs, 1);
  });

  test("a run whose driver went silent is taken over once the lease has passed", async () => {
    const store = createMemoryStore();
    let hang = true;
    const graph = createGraph("silent").node("a", async (_state, ctx) => {
      const value = await ctx.step("work", () => 7);
      // The first driver stops here for good, as a dead process would.
      if (hang) await new Promise(() => {});
      return { value };
    });
    const dying = createRunner({ store, graphs: [graph], leaseMs: 0 });
    await dying.launch(graph, {}, { threadId: "t" });
    await sleep(20);
    const rescuer = createRunner({ store, graphs: [graph], leaseMs: 100 });
    await assert.rejects(rescuer.resume("t"), (error) => (error as DurableError).code === "run_active");
    await sleep(150);
    hang = false;
    const done = await rescuer.resume("t");
    assert.equal(done.status, "completed");
    assert.deepEqual(done.state, { value: 7 });
    assert.ok((await rescuer.frames("t")).some((frame) => frame.type === "run_recovered"));
  });
});
