import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { type TempStore, tempSqliteStore } from "../../test/helpers.ts";
import { DurableError } from "../errors/durable-error.ts";
import { createGraph } from "../graph/create-graph.ts";
import { createRunner } from "./create-runner.ts";

interface Trip {
  city: string;
  flight?: string;
  hotel?: string;
  total?: number;
}

// A fresh SQLite store for every test in this file, whichever block it is in.
let temp: TempStore;
let ran: string[];
beforeEach(() => {
  temp = tempSqliteStore();
  ran = [];
});
afterEach(() => temp.cleanup());

describe("history and time travel", () => {
  const trip = () =>
    createGraph<Trip>("trip")
      .node("flight", async (state, ctx) => {
        ran.push("flight");
        return { flight: await ctx.step("book-flight", () => `to ${state.city}`) };
      })
      .node("hotel", async (state, ctx) => {
        ran.push("hotel");
        return { hotel: await ctx.step("book-hotel", () => `in ${state.city}`) };
      })
      .node("bill", (state) => {
        ran.push("bill");
        return { total: state.city.length * 100 };
      })
      .edge("flight", "hotel")
      .edge("hotel", "bill");

  test("history reads a run's states step by step: its start, then after each node", async () => {
    const runner = createRunner({ store: temp.store });
    const graph = trip();
    await runner.start(graph, { city: "Oslo" }, { threadId: "t" });
    const steps = await runner.history<Trip>("t");
    assert.deepEqual(
      steps.map((step) => [step.node, step.next, step.state]),
      [
        [null, "flight", { city: "Oslo" }],
        ["flight", "hotel", { city: "Oslo", flight: "to Oslo" }],
        ["hotel", "bill", { city: "Oslo", flight: "to Oslo", hotel: "in Oslo" }],
        ["bill", null, { city: "Oslo", flight: "to Oslo", hotel: "in Oslo", total: 400 }],
      ],
    );
    assert.ok(steps.every((step, index) => index === 0 || step.seq > (steps[index - 1]?.seq ?? 0)));
    // A second run on the thread: its own checkpoints, the state carried.
    const second = await runner.start(graph, { city: "Rome" }, { threadId: "t" });
    const mine = await runner.history<Trip>("t", { runId: second.runId });
    assert.equal(mine.length, 4);
    assert.deepEqual(mine[0]?.state, { city: "Rome", flight: "to Oslo", hotel: "in Oslo", total: 400 });
    assert.equal((await runner.history("t")).length, 8);
    await assert.rejects(runner.history("nowhere"), { code: "not_found" });
  });

  test("fork runs on from a past step: the nodes after it run afresh on a new thread, the original untouched", async () => {
    const runner = createRunner({ store: temp.store });
    await runner.start(trip(), { city: "Oslo" }, { threadId: "t" });
    const afterFlight = (await runner.history<Trip>("t")).find((step) => step.node === "flight");
    assert.ok(afterFlight !== undefined);
    ran.length = 0;
    const forked = await runner.fork<Trip>("t", {
      seq: afterFlight.seq,
      threadId: "t-lisbon",
      input: { city: "Lisbon" },
    });
    assert.equal(forked.status, "completed");
    assert.deepEqual(ran, ["hotel", "bill"], "the flight is not booked again");
    assert.deepEqual(forked.state, { city: "Lisbon", flight: "to Oslo", hotel: "in Lisbon", total: 600 });
    assert.equal((await runner.get<Trip>("t"))?.state.hotel, "in Oslo");
    const started = (await runner.frames("t-lisbon"))[0]?.data as { forkedFrom?: unknown };
    assert.deepEqual(started.forkedFrom, { threadId: "t", seq: afterFlight.seq });
    // The fork has a history of its own, starting where it was forked.
    assert.deepEqual(
      (await runner.history("t-lisbon")).map((step) => step.node),
      [null, "hotel", "bill"],
    );

    const last = (await runner.history("t")).at(-1);
    const isCode = (code: string) => (error: unknown) =>
      DurableError.isInstance(error) && error.code === code;
    await assert.rejects(runner.fork("t", { seq: last?.seq ?? 0 }), isCode("invalid_request"));
    await assert.rejects(runner.fork("t", { seq: 9999 }), isCode("invalid_request"));
    await assert.rejects(runner.fork("t", { seq: afterFlight.seq, threadId: "t" }), isCode("thread_exists"));
  });
});

describe("graph versions", () => {
  const pay = (version: number, compatibleWith: number[] = [], seen: number[] = []) =>
    createGraph<{ amount: number; reply?: string }>("pay", { version, compatibleWith }).node(
      "charge",
      async (state, ctx) => {
        seen.push(ctx.version);
        const quote = await ctx.step("quote", () => state.amount + 1);
        const answer = await ctx.interrupt<{ ok: boolean }>({ title: `Pay ${quote}?` });
        // Version 2 adds a step after the pause: runs of version 1 never recorded it, so it is safe.
        if (version >= 2 && ctx.version >= 2) await ctx.step("receipt", () => "sent");
        return { reply: answer.ok ? `paid ${quote}` : "kept" };
      },
    );

  test("a run started on version 1 resumes on version 2 that declares it compatible, and sees ctx.version 1", async () => {
    const seen: number[] = [];
    const before = await createRunner({ store: temp.store }).start(pay(1), { amount: 9 }, { threadId: "t" });
    assert.equal(before.status, "paused");
    const version2 = pay(2, [1], seen);
    const upgraded = createRunner({ store: temp.store, graphs: [version2] });
    const done = await upgraded.resume("t", { [before.interrupts[0]?.id ?? ""]: { ok: true } });
    assert.equal(done.status, "completed");
    assert.equal(done.state.reply, "paid 10");
    assert.deepEqual(seen, [1]);
    // A new run on the thread starts on the version the code is.
    const next = await upgraded.start(version2, { amount: 1 }, { threadId: "t" });
    assert.equal(next.status, "paused");
    assert.deepEqual(seen, [1, 2]);
  });

  test("a version that does not declare the run's version compatible fails journal_mismatch naming the step", async () => {
    const before = await createRunner({ store: temp.store }).start(pay(1), { amount: 9 }, { threadId: "t" });
    const answered = { [before.interrupts[0]?.id ?? ""]: { ok: true } };
    const incompatible = createRunner({ store: temp.store, graphs: [pay(3, [2])] });
    const failed = await incompatible.resume("t", answered);
    assert.equal(failed.status, "failed");
    assert.equal(failed.error?.code, "journal_mismatch");
    assert.match(failed.error?.message ?? "", /started on version 1 of graph "pay"/);
    assert.match(failed.error?.message ?? "", /node "charge", step "quote" \(charge#0\/0\)/);
    const data = failed.error?.data as { runVersion: number; graphVersion: number; step: string } | undefined;
    assert.deepEqual([data?.runVersion, data?.graphVersion, data?.step], [1, 3, "quote"]);
    assert.throws(() => createGraph("bad", { version: 0 }), { code: "invalid_graph" });
  });
});
