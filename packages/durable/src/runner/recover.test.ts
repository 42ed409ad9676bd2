import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createGraph } from "../graph/create-graph.ts";
import type { DurableStore } from "../store/durable-store.ts";
import { createMemoryStore } from "../stores/memory/memory-store.ts";
import { createSqliteStore } from "../stores/sqlite/sqlite-store.ts";
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

/** A run whose step kills its driver every time: each driver stops for good inside "work". */
function poisonGraph(name: string) {
  const calls = { work: 0 };
  const graph = createGraph<{ value?: number }>(name).node("a", async (_state, ctx) => {
    await ctx.step("work", async () => {
      calls.work++;
      await new Promise(() => {});
    });
    return {};
  });
  return { graph, calls };
}

/** A bare resume by a fresh runner whose driver then dies in the step, as a crashing process would. */
async function takeOverAndDie(store: DurableStore, graph: ReturnType<typeof poisonGraph>["graph"]) {
  const runner = createRunner({ store, graphs: [graph], leaseMs: 0 });
  const launched = await runner.launchResume("t");
  assert.ok(launched.firstSeq > 0, "the takeover wrote its run_recovered frame");
  await sleep(30);
}

describe("the takeover limit (a poison run)", () => {
  for (const kind of ["memory", "sqlite"] as const) {
    test(`${kind}: a run taken over maxTakeovers times ends failed (takeover_limit) at the next takeover`, async () => {
      const directory = mkdtempSync(join(tmpdir(), "durable-poison-"));
      const store =
        kind === "memory" ? createMemoryStore() : createSqliteStore({ path: join(directory, "d.sqlite") });
      try {
        const { graph, calls } = poisonGraph("poison");
        const first = createRunner({ store, graphs: [graph], leaseMs: 0 });
        await first.launch(graph, {}, { threadId: "t" });
        await sleep(30);
        for (let i = 0; i < 3; i++) await takeOverAndDie(store, graph);
        assert.equal(calls.work, 4, "each of the 3 takeovers ran the step again");

        const last = createRunner({ store, graphs: [graph], leaseMs: 0 });
        const ended = await last.resume("t");
        assert.equal(ended.status, "failed");
        const error = ended.error as { code: string; message: string; data: Record<string, unknown> };
        assert.equal(error.code, "takeover_limit");
        assert.match(error.message, /taken over 3 times/);
        assert.match(error.message, /node "a", step "work"/);
        assert.deepEqual(error.data, { takeovers: 3, maxTakeovers: 3, node: "a", step: "work" });
        assert.equal(calls.work, 4, "the step did not run a fifth time");

        const frames = await last.frames("t");
        assert.equal(frames.filter((frame) => frame.type === "run_recovered").length, 3);
        assert.equal(frames.at(-1)?.type, "run_failed");
        assert.equal(
          (frames.at(-1)?.data as { error?: { code?: string } } | undefined)?.error?.code,
          "takeover_limit",
        );
        // Ended: nobody takes it over again.
        const again = await createRunner({ store, graphs: [graph], leaseMs: 0 }).launchResume("t");
        assert.equal(again.firstSeq, 0);
        assert.equal((await again.finished).status, "failed");
        assert.equal(calls.work, 4);
      } finally {
        if (kind === "sqlite") await (store as DurableStore & { close(): Promise<void> }).close();
        rmSync(directory, { recursive: true, force: true });
      }
    });
  }

  test("the sweep ends a poison run too, at the runner's maxTakeovers", async () => {
    const store = createMemoryStore();
    const { graph, calls } = poisonGraph("swept-poison");
    const first = createRunner({ store, graphs: [graph], leaseMs: 0 });
    await first.launch(graph, {}, { threadId: "t" });
    await sleep(30);
    await takeOverAndDie(store, graph);
    const sweeper = createRunner({
      store,
      graphs: [graph],
      leaseMs: 200,
      maxTakeovers: 1,
      recover: { everyMs: 1000 },
    });
    assert.equal(await statusWithin(store, "t", 5000), "failed");
    const snapshot = await sweeper.get("t");
    const error = snapshot?.error as { code: string; message: string };
    assert.equal(error.code, "takeover_limit");
    assert.match(error.message, /taken over 1 time /);
    assert.equal(calls.work, 2);
    await sweeper.close();
  });

  test("a run below the limit is still taken over and completes; a new run of the thread counts afresh", async () => {
    const store = createMemoryStore();
    const { graph, calls, wake } = hangingGraph("below");
    await abandon(store, graph, "t");
    wake();
    const rescuer = createRunner({ store, graphs: [graph], leaseMs: 0, maxTakeovers: 1 });
    assert.equal((await rescuer.resume("t")).status, "completed");
    assert.deepEqual(calls, { work: 1, after: 1 });

    // The thread's next run starts with no takeovers behind it, whatever the earlier run had.
    const next = hangingGraph("below");
    const dying = createRunner({ store, graphs: [next.graph], leaseMs: 0 });
    await dying.launch(next.graph, {}, { threadId: "t" });
    await sleep(30);
    next.wake();
    const again = createRunner({ store, graphs: [next.graph], leaseMs: 0, maxTakeovers: 1 });
    assert.equal((await again.resume("t")).status, "completed");
    await rescuer.close();
    await again.close();
  });
});
