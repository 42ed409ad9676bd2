/**
 * The client against the real server when the connection is reset after the request landed and
 * before any of the answer came back: the client cannot tell whether it landed, so it sends again only
 * what is harmless twice (a resume with answers, a start with a thread id and a run id), and the server
 * does each thing once; a start without a run id is not sent again.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { approve, createGraph, createRunner, type Runner, tool } from "@tackle/durable";
import { createDurableClient, type DurableServer, serveDurable } from "@tackle/durable/http";
import { startTcpRelay, type TcpRelay } from "@tackle/test-support";
import { type TempStore, tempSqliteStore } from "./helpers.ts";

const refunds: string[] = [];
const graph = createGraph<{ id: string; reply?: string }>("refund").node("task", async (state, ctx) => {
  const reply = await tool(ctx, "refund", { id: state.id }, async () => {
    const answer = await approve(ctx, { title: `Refund ${state.id}?`, toolCallId: "task:tool:0" });
    if (!answer.approved) return "kept";
    refunds.push(state.id);
    return "refunded";
  });
  return { reply };
});

describe("the durable client on a connection reset before the answer", () => {
  let temp: TempStore;
  let runner: Runner;
  let server: DurableServer;
  let relay: TcpRelay;
  before(async () => {
    temp = tempSqliteStore();
    runner = createRunner({ store: temp.store, graphs: [graph], pollIntervalMs: 50 });
    server = await serveDurable({ runner });
    relay = await startTcpRelay(server.url);
  });
  after(async () => {
    await relay.close();
    await server.close();
    await runner.idle();
    await temp.cleanup();
  });

  const pausedWithin = async (threadId: string) => {
    const until = Date.now() + 5000;
    for (;;) {
      const run = await runner.get(threadId);
      if (run?.status === "paused" || Date.now() > until) return run;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };

  test("a start with a thread id and a run id is sent again and starts one run", async () => {
    const client = createDurableClient({ baseUrl: relay.url });
    relay.loseNextAnswer();
    const started = await client.start("refund", { id: "A" }, { threadId: "retried-start", runId: "run-A1" });
    assert.deepEqual(started, { threadId: "retried-start", runId: "run-A1" });
    assert.equal(relay.resets, 1);
    assert.deepEqual(
      relay.requests.filter((request) => request === "POST /runs"),
      ["POST /runs", "POST /runs"],
    );
    assert.equal((await pausedWithin("retried-start"))?.status, "paused");
    const runs = await runner.runs("retried-start");
    assert.deepEqual(
      runs.map((run) => run.runId),
      ["run-A1"],
    );
  });

  test("a resume with answers is sent again: the approved refund runs once and the run completes", async () => {
    const client = createDurableClient({ baseUrl: relay.url });
    await client.start("refund", { id: "B" }, { threadId: "retried-resume" });
    const paused = await pausedWithin("retried-resume");
    assert.equal(paused?.status, "paused");
    const id = paused?.interrupts[0]?.id ?? "";
    const before = relay.resets;
    relay.loseNextAnswer();
    const resumed = await client.resume("retried-resume", { [id]: { approved: true } });
    assert.equal(resumed.threadId, "retried-resume");
    assert.equal(relay.resets, before + 1);
    assert.equal(
      relay.requests.filter((request) => request === "POST /runs/retried-resume/resume").length,
      2,
    );
    await runner.idle();
    const run = await client.get("retried-resume");
    assert.equal(run.status, "completed");
    assert.equal(run.state.reply, "refunded");
    assert.deepEqual(
      refunds.filter((order) => order === "B"),
      ["B"],
    );
  });

  test("a start without a run id is not sent again: the caller sees the error, the server started one run", async () => {
    const client = createDurableClient({ baseUrl: relay.url });
    const before = (await runner.threads({})).length;
    const posts = relay.requests.filter((request) => request === "POST /runs").length;
    relay.loseNextAnswer();
    await assert.rejects(client.start("refund", { id: "C" }), /fetch failed/);
    assert.equal(relay.requests.filter((request) => request === "POST /runs").length, posts + 1);
    assert.equal((await runner.threads({})).length, before + 1);
  });
});
