/**
 * Races between live runners that the concurrent-drivers property (`concurrent-drivers.property.test.ts`)
 * found, each set up here so it happens every time: a start sent twice whose second copy claims the
 * thread after the first copy's run ended; a heartbeat answered after its drive ended, while a later
 * drive of the thread runs on the same runner; a run cancelled from another runner while a node waits
 * on its signal.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "@tackle/core";
import { createGraph, createMemoryStore, createRunner, type DurableStore } from "@tackle/durable";

/** A store whose `method` calls wait for `hold(args)` first. */
function holding(
  base: DurableStore,
  method: keyof DurableStore,
  hold: (args: unknown[]) => Promise<void>,
): DurableStore {
  return new Proxy(base, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (property !== method || typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        await hold(args);
        return (value as (...parameters: unknown[]) => Promise<unknown>).apply(target, args);
      };
    },
  });
}

/** A logger that keeps what was logged at error level. */
function errorsOf(): { logger: Logger; errors: string[] } {
  const errors: string[] = [];
  const ignore = () => {};
  return {
    errors,
    logger: { debug: ignore, info: ignore, warn: ignore, error: (message) => errors.push(message) },
  };
}

describe("racing runners", () => {
  test("a start sent twice whose copy claims after the other's run ended answers that run, never a second run of it", async () => {
    const base = createMemoryStore();
    let effects = 0;
    const graph = createGraph<{ n: number }>("twice").node("a", async (state, ctx) => {
      await ctx.step("effect", () => {
        effects += 1;
      });
      return { n: state.n + 1 };
    });
    const first = createRunner({ store: base, graphs: [graph], recover: false });
    await first.start(graph, { n: 0 }, { threadId: "t", runId: "r1" });
    // The second copy reads the ended run r1, then its claim waits until the first copy's r2 has ended.
    let claimAsked!: () => void;
    const asked = new Promise<void>((resolve) => {
      claimAsked = resolve;
    });
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slow = createRunner({
      store: holding(base, "claimRun", async () => {
        claimAsked();
        await released;
      }),
      graphs: [graph],
      recover: false,
    });
    const copy = slow.start(graph, { n: 0 }, { threadId: "t", runId: "r2" });
    await asked;
    const done = await first.start(graph, { n: 0 }, { threadId: "t", runId: "r2" });
    assert.equal(done.status, "completed");
    release();
    const answered = await copy;
    assert.equal(answered.runId, "r2");
    assert.equal(answered.status, "completed");
    assert.equal(effects, 2, "r1 and r2 ran their step once each");
    const starts = await base.readFrames("t", 0, 1000, ["run_started"]);
    assert.deepEqual(
      starts.map((frame) => (frame.data as { runId: string }).runId),
      ["r1", "r2"],
    );
    await Promise.all([first.close(), slow.close()]);
  });

  test("a heartbeat answered after its drive ended leaves the thread's next drive on that runner alone", async () => {
    const base = createMemoryStore();
    // The pause's commit is slow (heartbeats queue behind it), and every heartbeat takes 50 ms.
    const store = holding(base, "commit", async (args) => {
      const batch = args[2] as { run?: { status?: string }; frames?: unknown[]; journal?: unknown[] };
      if (batch.run?.status === "paused") await sleep(70);
      else if (batch.run === undefined && batch.frames === undefined && batch.journal === undefined)
        await sleep(50);
    });
    const graph = createGraph<{ done?: boolean }>("beats")
      .node("ask", async (_state, ctx) => {
        await ctx.interrupt({ ask: "go?" });
        return {};
      })
      .node("work", async (_state, ctx) => {
        // A step that stops when its signal aborts, as a model call or a fetch given it does.
        await ctx.step("wait", (info) => sleep(200, undefined, { signal: info.signal }));
        return { done: true };
      })
      .edge("ask", "work");
    const { logger, errors } = errorsOf();
    const runner = createRunner({ store, graphs: [graph], leaseMs: 60, recover: false, logger });
    const paused = await runner.start(graph, {}, { threadId: "t" });
    assert.equal(paused.status, "paused");
    // Resumed at once on the same runner: the first drive's queued heartbeats land after this claim.
    const resumed = await runner.resume("t", { [paused.interrupts[0]?.id as string]: "go" });
    assert.equal(resumed.status, "completed", JSON.stringify(resumed.error));
    assert.deepEqual(errors, []);
    await runner.close();
  });

  test("a run cancelled from another runner: the runner that drove it reports no failure", async () => {
    const base = createMemoryStore();
    const graph = createGraph<{ done?: boolean }>("cancelled").node("wait", async (_state, ctx) => {
      // A node that hands its signal on (a model call): it stops when the signal aborts.
      await sleep(5_000, undefined, { signal: ctx.signal });
      return { done: true };
    });
    const { logger, errors } = errorsOf();
    const driver = createRunner({ store: base, graphs: [graph], leaseMs: 60, recover: false, logger });
    const other = createRunner({ store: base, graphs: [graph], leaseMs: 60, recover: false });
    const driven = driver.start(graph, {}, { threadId: "t" });
    await sleep(30);
    const cancelled = await other.cancel("t", "stop");
    assert.equal(cancelled.status, "cancelled");
    // The driver's heartbeat finds the run fenced and aborts the node, which stops with that reason.
    const seen = await driven;
    assert.equal(seen.status, "cancelled");
    assert.deepEqual(errors, [], "the run did not fail: it was cancelled");
    await Promise.all([driver.close(), other.close()]);
  });
});
