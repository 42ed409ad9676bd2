/**
 * The edges a stock AG-UI client meets: a `RunAgentInput` sent again, a paused run cancelled under the
 * client, and `HttpAgent.abortRun()` — each driven with `@ag-ui/client`'s HttpAgent over real HTTP.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { HttpAgent } from "@ag-ui/client";
import { createGraph, createRunner, type Runner, runIntegratedTool, tool } from "@tackle/durable";
import { type DurableServer, serveDurable } from "@tackle/durable/http";
import { drive, verified } from "./ag-ui-client.ts";
import { type TempStore, tempSqliteStore } from "./helpers.ts";

const booked: string[] = [];
const booking = createGraph<{ seat: string; reply?: unknown }>("booking").node("book", async (state, ctx) => {
  const reply = await tool(ctx, "book", { seat: state.seat }, async () => {
    booked.push(state.seat);
    await sleep(20);
    return { booked: state.seat };
  });
  return { reply };
});

const charged: number[] = [];
const charge = createGraph<{ amount: number; reply?: unknown }>("charge").node("pay", async (state, ctx) => {
  const reply = await runIntegratedTool(
    ctx,
    "charge",
    { amount: state.amount },
    { approve: true },
    (args) => {
      charged.push((args as { amount: number }).amount);
      return { charged: (args as { amount: number }).amount };
    },
  );
  return { reply };
});

const waiting: AbortSignal[] = [];
const slow = createGraph("slow").node("wait", async (_state, ctx) => {
  await tool(ctx, "long_job", {}, (info) => {
    waiting.push(info.signal);
    return new Promise((_resolve, reject) =>
      info.signal.addEventListener("abort", () => reject(info.signal.reason)),
    );
  });
  return {};
});

/** Polls `check` every 20 ms until it holds, failing after `ms`. */
async function until(check: () => Promise<boolean> | boolean, what: string, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

// One store, runner and server for every test in this file.
let temp: TempStore;
let runner: Runner;
let server: DurableServer;
before(async () => {
  temp = tempSqliteStore();
  runner = createRunner({ store: temp.store, graphs: [booking, charge, slow], pollIntervalMs: 25 });
  server = await serveDurable({ runner });
});
after(async () => {
  await server.close();
  await runner.idle();
  await temp.cleanup();
});

const agentFor = (graph: string, threadId: string, state: object) =>
  new HttpAgent({ url: `${server.url}/ag-ui/${graph}`, threadId, initialState: state });

describe("AG-UI edges with a stock HttpAgent: repeated inputs", () => {
  test("the same RunAgentInput sent again after its run ended answers that run: the tool ran once", async () => {
    const first = await verified(
      await drive(agentFor("booking", "book-again", { seat: "1A" }), { runId: "r-1" }),
    );
    // Another client (a reload, a retry) sends the same input: same thread, same runId.
    const again = agentFor("booking", "book-again", { seat: "1A" });
    const second = await verified(await drive(again, { runId: "r-1" }));
    assert.deepEqual(
      booked.filter((seat) => seat === "1A"),
      ["1A"],
      "the tool ran once",
    );
    assert.deepEqual(second, first, "the repeat streams the run it started, event for event");
    assert.equal((await runner.runs("book-again")).length, 1);
    const call = again.messages.find((message) => message.role === "tool");
    assert.deepEqual(JSON.parse(String(call?.content)), { booked: "1A" });
  });

  test("the same RunAgentInput sent twice at once starts one run; both streams verify", async () => {
    const [one, two] = await Promise.all([
      drive(agentFor("booking", "book-twice", { seat: "2B" }), { runId: "r-2" }),
      drive(agentFor("booking", "book-twice", { seat: "2B" }), { runId: "r-2" }),
    ]);
    await verified(one ?? []);
    await verified(two ?? []);
    assert.deepEqual(
      booked.filter((seat) => seat === "2B"),
      ["2B"],
    );
    assert.equal((await runner.runs("book-twice")).length, 1);
  });

  test("a resume sent again answers the resumed run instead of 409", async () => {
    const agent = agentFor("charge", "resume-again", { amount: 5 });
    await drive(agent);
    const [pending] = agent.pendingInterrupts;
    assert.ok(pending !== undefined);
    const resume = [{ interruptId: pending.id, status: "resolved" as const, payload: { approved: true } }];
    const first = await verified(await drive(agent, { runId: "resume-1", resume }));
    const replay = agentFor("charge", "resume-again", { amount: 5 });
    const second = await verified(await drive(replay, { runId: "resume-1", resume }));
    assert.deepEqual(second.at(-1), first.at(-1));
    assert.deepEqual(
      charged.filter((amount) => amount === 5),
      [5],
    );
  });
});

describe("AG-UI edges with a stock HttpAgent: answers", () => {
  test("a resume naming no open interrupt, even `__proto__`, is refused; the run stays paused", async () => {
    const agent = agentFor("charge", "resume-proto", { amount: 9 });
    await drive(agent);
    const [pending] = agent.pendingInterrupts;
    assert.ok(pending !== undefined);
    for (const interruptId of ["__proto__", "constructor"]) {
      const resume = [
        { interruptId, status: "resolved" as const, payload: { [pending.id]: { approved: true } } },
      ];
      const events = await drive(agentFor("charge", "resume-proto", { amount: 9 }), { resume }).catch(
        (error: unknown) => [{ type: "THROWN", message: String(error) }],
      );
      assert.match(JSON.stringify(events.at(-1)), /unknown_interrupt/, interruptId);
    }
    assert.equal((await runner.get("resume-proto"))?.status, "paused");
    assert.deepEqual(
      charged.filter((amount) => amount === 9),
      [],
    );
  });
});

describe("AG-UI edges with a stock HttpAgent: cancelling", () => {
  test("a paused run cancelled under the client: its resume ends cancelled, pending interrupts clear, a new run goes on", async () => {
    const agent = agentFor("charge", "cancel-under", { amount: 7 });
    await drive(agent);
    const [pending] = agent.pendingInterrupts;
    assert.ok(pending !== undefined);
    await runner.cancel("cancel-under", "offer withdrawn");
    // The runner and the plain HTTP API answer run_cancelled, not "already answered differently".
    const direct = await fetch(`${server.url}/runs/cancel-under/resume`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ answers: { [pending.id]: { approved: true } } }),
    });
    assert.equal(direct.status, 409);
    assert.equal(((await direct.json()) as { error: { code: string } }).error.code, "run_cancelled");
    await assert.rejects(runner.resume("cancel-under", { [pending.id]: { approved: true } }), {
      code: "run_cancelled",
    });

    const events = await verified(
      await drive(agent, {
        runId: "late-answer",
        resume: [{ interruptId: pending.id, status: "resolved", payload: { approved: true } }],
      }),
    );
    const started = events[0] as unknown as { type: string; runId: string };
    assert.deepEqual([started.type, started.runId], ["RUN_STARTED", "late-answer"]);
    assert.deepEqual((events.at(-1) as unknown as { outcome: unknown }).outcome, { type: "cancelled" });
    assert.deepEqual(agent.pendingInterrupts, [], "the stock client holds no stale interrupt");
    assert.ok(!charged.includes(7), "the cancelled call never ran");
    const result = agent.messages.find((message) => message.role === "tool");
    assert.deepEqual(JSON.parse(String(result?.content)), { cancelled: true, reason: "offer withdrawn" });

    // The client goes on: a new run on the thread, which pauses for its own approval.
    agent.setState({ amount: 8 });
    const next = await verified(await drive(agent));
    assert.equal((next.at(-1) as unknown as { outcome: { type: string } }).outcome.type, "interrupt");
    assert.equal(agent.pendingInterrupts.length, 1);
    assert.deepEqual(
      (await runner.runs("cancel-under")).map((run) => run.status),
      ["cancelled", "paused"],
    );
  });

  test("HttpAgent.abortRun() cancels the server's run: the step's signal aborts, the run ends cancelled", async () => {
    waiting.length = 0;
    const agent = agentFor("slow", "abort-run", {});
    const running = agent.runAgent().catch(() => undefined);
    await until(() => waiting.length > 0, "the step to start");
    agent.abortRun();
    await running;
    await until(
      async () => (await runner.get("abort-run"))?.status === "cancelled",
      "the run to be cancelled",
    );
    assert.equal(waiting[0]?.aborted, true);
    const frames = await runner.frames("abort-run");
    assert.deepEqual(frames.at(-1)?.data, { reason: "the AG-UI client aborted the run" });
  });
});
