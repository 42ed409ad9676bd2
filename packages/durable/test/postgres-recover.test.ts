/**
 * The recovery sweep on real PostgreSQL. The gap it closes: a runner loses the database mid-run, so
 * it can record neither the step's outcome nor the run's failure, and the run stays `running` with
 * nobody driving it. Once the database is back, a runner takes the run over by itself (no client
 * `resume`), after the lease by the database's clock, and the tools already journaled do not run again.
 * The runners reach PostgreSQL through a TCP relay the test can cut, as an outage would.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createGraph, createRunner, type DurableStore, type Runner, tool } from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createTestDatabase, startTcpRelay, type TestDatabase } from "@tackle/test-support";

let database: TestDatabase;
before(async () => {
  database = await createTestDatabase("tackle_durable_recover");
});
after(async () => {
  await database?.drop();
});

const leaseMs = 1500;

it("a run whose driver lost PostgreSQL before it could record anything is resumed by a runner on its own", {
  timeout: 60_000,
}, async () => {
  const effects: [which: string, runner: string][] = [];
  let firstHold = true;
  let heldStarted: () => void = () => {};
  const holding = new Promise<void>((resolve) => {
    heldStarted = resolve;
  });
  // One graph per runner (same name), so an effect says which runner ran it.
  const graphOf = (label: string) =>
    createGraph<{ a?: number; b?: number }>("recover").node("work", async (_state, ctx) => {
      const a = await tool(ctx, "effect", { which: "a" }, () => {
        effects.push(["a", label]);
        return 1;
      });
      await ctx.step("hold", async () => {
        if (!firstHold) return;
        firstHold = false;
        heldStarted();
        await sleep(800);
      });
      const b = await tool(ctx, "effect", { which: "b" }, () => {
        effects.push(["b", label]);
        return 2;
      });
      return { a, b };
    });

  const net = await startTcpRelay(database.url);
  const quiet = () => {};
  const stores: DurableStore[] = [];
  const runners: Runner[] = [];
  const open = async (label: string) => {
    const store = await createPostgresStore({ connectionString: net.url, onError: quiet });
    stores.push(store);
    const runner = createRunner({ store, graphs: [graphOf(label)], leaseMs, recover: { everyMs: 1000 } });
    runners.push(runner);
    return runner;
  };
  const observer = await createPostgresStore({ connectionString: database.url });
  try {
    const driver = await open("A");
    await open("B");
    const launched = await driver.launch("recover", {}, { threadId: "t-outage" });
    await holding;
    // PostgreSQL goes away while the step holds: its outcome, the next tool's marker and the run's
    // failure all fail to land.
    net.down();
    await assert.rejects(launched.finished);
    assert.equal((await observer.getRun("t-outage"))?.status, "running");
    await sleep(1500);
    assert.deepEqual(effects, [["a", "A"]]);
    net.up();

    // No resume from anyone: a runner's sweep takes the run over once it has been silent for the lease.
    const until = Date.now() + 20_000;
    while ((await observer.getRun("t-outage"))?.status === "running" && Date.now() < until) await sleep(100);
    const run = await observer.getRun("t-outage");
    assert.equal(run?.status, "completed");
    assert.equal(run?.state, '{"v":1,"value":{"a":1,"b":2}}');
    // "a" was journaled before the outage and ran once; "b" ran once, by whichever runner took over.
    assert.equal(effects.length, 2, JSON.stringify(effects));
    assert.deepEqual(effects[0], ["a", "A"]);
    assert.equal(effects[1]?.[0], "b");
    const frames = await observer.readFrames("t-outage", 0);
    assert.deepEqual(
      frames.map((frame) => frame.seq),
      frames.map((_frame, index) => index + 1),
    );
    assert.equal(frames.filter((frame) => frame.type === "run_recovered").length, 1);
  } finally {
    for (const runner of runners) await runner.close();
    for (const store of stores) await store.close();
    await observer.close();
    await net.close();
  }
});

it("a poison run (its step stops every driver) is taken over maxTakeovers times, then ends failed with takeover_limit", {
  timeout: 30_000,
}, async () => {
  const store = await createPostgresStore({ connectionString: database.url });
  let work = 0;
  const graph = createGraph("pg-poison").node("a", async (_state, ctx) => {
    await ctx.step("work", async () => {
      work++;
      await new Promise(() => {}); // the driver dies here, every time
    });
    return {};
  });
  try {
    // Each driver is left stuck inside the step once the step has begun (its journal's started marker
    // is what the next driver takes over); a fixed sleep is not enough on a loaded machine.
    const stepBegun = async (count: number) => {
      const deadline = Date.now() + 15_000;
      while (work < count && Date.now() < deadline) await sleep(10);
      assert.equal(work, count, "the step began");
    };
    await createRunner({ store, graphs: [graph], leaseMs: 0 }).launch(graph, {}, { threadId: "poison" });
    await stepBegun(1);
    for (let i = 0; i < 2; i++) {
      const launched = await createRunner({ store, graphs: [graph], leaseMs: 0 }).launchResume("poison");
      assert.ok(launched.firstSeq > 0);
      await stepBegun(i + 2);
    }
    assert.equal(work, 3);
    const last = createRunner({ store, graphs: [graph], leaseMs: 0, maxTakeovers: 2 });
    const ended = await last.resume("poison");
    assert.equal(ended.status, "failed");
    assert.equal((ended.error as { code?: string }).code, "takeover_limit");
    assert.match(String((ended.error as { message?: string }).message), /taken over 2 times.*step "work"/);
    assert.equal(work, 3);
    const frames = await last.frames("poison");
    assert.equal(frames.filter((frame) => frame.type === "run_recovered").length, 2);
    assert.equal(frames.at(-1)?.type, "run_failed");
  } finally {
    await store.close();
  }
});
