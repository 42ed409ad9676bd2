import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createGraph } from "../graph/create-graph.ts";
import type { DurableStore } from "../store/durable-store.ts";
import { createMemoryStore } from "../stores/memory/memory-store.ts";
import { createRunner } from "./create-runner.ts";

/** A run whose first driver stops for good after its first step, as a dead process would. */
function hangingGraph(name: string) {
  const calls = { work: 0, after: 0 };
  let hang = true;
  const graph = createGraph<{ value?: number }>(name).node("a", async (_state, ctx) => {
    const value = await ctx.step("work", () => {
      calls.work++;
      return 7;
    });
    if (hang) await new Promise(() => {});
    await ctx.step("after", () => {
      calls.after++;
    });
    return { value };
  });
  return {
    graph,
    calls,
    wake() {
      hang = false;
    },
  };
}

async function abandon(
  store: DurableStore,
  graph: ReturnType<typeof hangingGraph>["graph"],
  threadId: string,
) {
  const dying = createRunner({ store, graphs: [graph], leaseMs: 0 });
  await dying.launch(graph, {}, { threadId });
  await sleep(30);
}

async function statusWithin(store: DurableStore, threadId: string, ms: number): Promise<string | undefined> {
  const until = Date.now() + ms;
  for (;;) {
    const status = (await store.getRun(threadId))?.status;
    if (status !== "running" || Date.now() > until) return status;
    await sleep(50);
  }
}

describe("the recovery sweep", () => {
  test("a runner takes over a silent run of its graph with no resume from anyone", async () => {
    const store = createMemoryStore();
    const { graph, calls, wake } = hangingGraph("swept");
    await abandon(store, graph, "t");
    wake();
    const rescuer = createRunner({ store, graphs: [graph], leaseMs: 200, recover: { everyMs: 1000 } });
    assert.equal(await statusWithin(store, "t", 5000), "completed");
    assert.deepEqual(calls, { work: 1, after: 1 });
    const frames = await rescuer.frames("t");
    assert.equal(frames.filter((frame) => frame.type === "run_recovered").length, 1);
    await rescuer.close();
  });

  test("never a run whose driver is alive (its heartbeat), nor one of a graph the runner lacks, nor with recover: false", async () => {
    const store = createMemoryStore();
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let slow = 0;
    const live = createGraph("live").node("a", async (_state, ctx) => {
      await ctx.step("slow", async () => {
        slow++;
        await gate;
      });
    });
    const driver = createRunner({ store, graphs: [live], leaseMs: 300, recover: false });
    const launched = await driver.launch(live, {}, { threadId: "live" });
    const unknown = hangingGraph("unknown");
    await abandon(store, unknown.graph, "unknown");
    const off = hangingGraph("off");
    await abandon(store, off.graph, "off");
    const owners = {
      unknown: (await store.getRun("unknown"))?.owner,
      off: (await store.getRun("off"))?.owner,
    };

    const sweeper = createRunner({ store, graphs: [live], leaseMs: 300, recover: { everyMs: 1000 } });
    const disabled = createRunner({ store, graphs: [off.graph], leaseMs: 300, recover: false });
    await sleep(2300); // two looks or more, each long past the lease
    assert.equal((await store.getRun("unknown"))?.owner, owners.unknown);
    assert.equal((await store.getRun("off"))?.owner, owners.off);
    assert.equal((await store.getRun("live"))?.status, "running");
    release();
    assert.equal((await launched.finished).status, "completed");
    assert.equal(slow, 1);
    assert.ok(!(await driver.frames("live")).some((frame) => frame.type === "run_recovered"));
    await Promise.all([sweeper.close(), disabled.close(), driver.close()]);
  });
});
