/** A thread's history and a fork from a past step, over a real HTTP server on loopback with the client. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createGraph, createRunner, type Runner } from "@tackle/durable";
import {
  createDurableClient,
  type DurableClient,
  type DurableServer,
  serveDurable,
} from "@tackle/durable/http";
import { type TempStore, tempSqliteStore } from "./helpers.ts";

interface Trip {
  city: string;
  flight?: string;
  hotel?: string;
  total?: number;
}

const ran: string[] = [];
const trip = createGraph<Trip>("trip")
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

const tokens: Record<string, string> = { "token-a": "acme", "token-b": "globex" };
const authenticate = (request: Request) =>
  tokens[(request.headers.get("authorization") ?? "").replace(/^Bearer /, "")];

/** Starts a trip and reads its frames to the end. */
async function travel(client: DurableClient, threadId: string, city: string): Promise<void> {
  await client.start("trip", { city }, { threadId });
  for await (const _ of client.frames(threadId)) {
    // read to the end of the run
  }
}

async function rejectsWith(promise: Promise<unknown>, code: string, message?: RegExp): Promise<void> {
  await assert.rejects(promise, (error: Error & { code?: string }) => {
    assert.equal(error.code, code, error.message);
    if (message !== undefined) assert.match(error.message, message);
    return true;
  });
}

describe("history and fork over HTTP", () => {
  let temp: TempStore;
  let runner: Runner;
  let server: DurableServer;
  let acme: DurableClient;
  let globex: DurableClient;
  before(async () => {
    temp = tempSqliteStore();
    runner = createRunner({ store: temp.store, graphs: [trip], pollIntervalMs: 50 });
    server = await serveDurable({ runner, authenticate });
    acme = createDurableClient({ baseUrl: server.url, headers: { authorization: "Bearer token-a" } });
    globex = createDurableClient({ baseUrl: server.url, headers: { authorization: "Bearer token-b" } });
    await travel(acme, "oslo", "Oslo");
  });
  after(async () => {
    await server.close();
    await runner.idle();
    await temp.cleanup();
  });

  test("history answers the run's states step by step: its start, then after each node", async () => {
    const steps = await acme.history<Trip>("oslo");
    assert.deepEqual(
      steps.map((step) => [step.node, step.next, step.state]),
      [
        [null, "flight", { city: "Oslo" }],
        ["flight", "hotel", { city: "Oslo", flight: "to Oslo" }],
        ["hotel", "bill", { city: "Oslo", flight: "to Oslo", hotel: "in Oslo" }],
        ["bill", null, { city: "Oslo", flight: "to Oslo", hotel: "in Oslo", total: 400 }],
      ],
    );
    assert.ok(steps.every((step) => step.graph === "trip" && step.runId === steps[0]?.runId));
    // One run's checkpoints by its id; another id has none.
    assert.equal((await acme.history("oslo", { runId: steps[0]?.runId ?? "" })).length, 4);
    assert.deepEqual(await acme.history("oslo", { runId: "no-such-run" }), []);
  });

  test("a fork runs on from a past step with an edited state; the steps before it are not run again", async () => {
    const steps = await acme.history<Trip>("oslo");
    const afterFlight = steps.find((step) => step.node === "flight");
    assert.ok(afterFlight);
    ran.length = 0;
    const forked = await acme.fork<Trip>("oslo", {
      seq: afterFlight.seq,
      threadId: "rome",
      input: { city: "Rome" },
    });
    assert.equal(forked.threadId, "rome", "the caller's own thread id, without its tenant");
    assert.equal(forked.status, "completed");
    assert.deepEqual(forked.state, { city: "Rome", flight: "to Oslo", hotel: "in Rome", total: 400 });
    assert.deepEqual(ran, ["hotel", "bill"]);
    // The fork's own history starts at the edited checkpoint; the original thread is as it was.
    const forkSteps = await acme.history<Trip>("rome");
    assert.deepEqual(
      forkSteps.map((step) => [step.node, step.next]),
      [
        [null, "hotel"],
        ["hotel", "bill"],
        ["bill", null],
      ],
    );
    assert.equal((await acme.get<Trip>("oslo")).state.hotel, "in Oslo");
    // Without a thread id the fork gets a fresh one.
    const fresh = await acme.fork<Trip>("oslo", { seq: afterFlight.seq });
    assert.match(fresh.threadId, /^[0-9a-f-]{36}$/);
    assert.equal(fresh.status, "completed");
  });

  test("the errors are typed: an unknown thread, a seq with no checkpoint or nothing after it, a taken id, bad input", async () => {
    const steps = await acme.history("oslo");
    const last = steps.at(-1);
    assert.ok(last);
    await rejectsWith(acme.history("nowhere"), "not_found", /No run for thread "nowhere"/);
    await rejectsWith(acme.fork("nowhere", { seq: 1 }), "not_found");
    await rejectsWith(acme.fork("oslo", { seq: 999_999 }), "invalid_request", /no checkpoint at seq 999999/);
    await rejectsWith(acme.fork("oslo", { seq: last.seq }), "invalid_request", /Nothing runs after/);
    await rejectsWith(
      acme.fork("oslo", { seq: steps[1]?.seq ?? 0, threadId: "rome" }),
      "thread_exists",
      /"rome" exists/,
    );
    await rejectsWith(acme.fork("oslo", { seq: 0 }), "invalid_request", /`seq`/);
    await rejectsWith(acme.fork("oslo", { seq: 2, threadId: "bad id!" }), "invalid_request", /`threadId`/);
    await rejectsWith(acme.history("oslo", { runId: "bad id!" }), "invalid_request", /`runId`/);
    // The status codes a plain HTTP client reads.
    const headers = { authorization: "Bearer token-a", "content-type": "application/json" };
    const missing = await fetch(`${server.url}/runs/nowhere/history`, { headers });
    assert.equal(missing.status, 404);
    const taken = await fetch(`${server.url}/runs/oslo/fork`, {
      method: "POST",
      headers,
      body: JSON.stringify({ seq: steps[1]?.seq, threadId: "rome" }),
    });
    assert.equal(taken.status, 409);
    const bad = await fetch(`${server.url}/runs/oslo/fork`, { method: "POST", headers, body: "{}" });
    assert.equal(bad.status, 400);
  });

  test("each tenant reads and forks only its own threads", async () => {
    await rejectsWith(globex.history("oslo"), "not_found");
    const steps = await acme.history("oslo");
    await rejectsWith(globex.fork("oslo", { seq: steps[1]?.seq ?? 0, threadId: "stolen" }), "not_found");
    // Globex may use the same thread id for its own fork of its own run.
    await travel(globex, "oslo", "Oslo");
    const theirs = await globex.history("oslo");
    const forked = await globex.fork("oslo", { seq: theirs[1]?.seq ?? 0, threadId: "rome" });
    assert.equal(forked.threadId, "rome");
    assert.equal(forked.status, "completed");
  });
});
