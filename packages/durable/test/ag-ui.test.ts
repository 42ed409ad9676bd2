/**
 * A stock AG-UI client drives durable runs: `@ag-ui/client`'s HttpAgent over real HTTP, every stream
 * checked by the client's own `verifyEvents`, and the client's default reducer compared with the
 * journal's tool cards.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { HttpAgent, type Message } from "@ag-ui/client";
import {
  approve,
  createGraph,
  createRunner,
  type Frame,
  type Runner,
  runIntegratedTool,
  tool,
} from "@tackle/durable";
import { type DurableServer, serveDurable } from "@tackle/durable/http";
import { drive, readEvents, verified } from "./ag-ui-client.ts";
import { applyToolCards, type TempStore, tempSqliteStore } from "./helpers.ts";

const charged: number[] = [];
const waiting: AbortSignal[] = [];
const slow = createGraph("slow").node("wait", async (_state, ctx) => {
  await tool(ctx, "long_job", { job: 1 }, (info) => {
    waiting.push(info.signal);
    return new Promise((_resolve, reject) =>
      info.signal.addEventListener("abort", () => reject(info.signal.reason)),
    );
  });
  return {};
});

interface PayState {
  amount: number;
  reply?: unknown;
  fee?: unknown;
}
const payments = createGraph<PayState>("payments")
  .node("quote", async (state, ctx) => {
    const fee = await tool(ctx, "quote", { amount: state.amount }, () => ({ fee: 1.5 }));
    return { fee };
  })
  .node("pay", async (state, ctx) => {
    // The framework path: the approval is asked before the tool runs, bound to its arguments.
    const reply = await runIntegratedTool(
      ctx,
      "charge",
      { amount: state.amount },
      { approve: true },
      (args) => {
        const { amount } = args as { amount: number };
        charged.push(amount);
        return { charged: amount };
      },
      {
        inputSchema: {
          type: "object",
          properties: { amount: { type: "number", maximum: 100 } },
          required: ["amount"],
        },
      },
    );
    return { reply };
  })
  .edge("quote", "pay");

// The approval is asked from inside the tool's fn: the call shows `running` twice in the journal.
const refunds = createGraph<{ id: string; reply?: string }>("refunds").node("task", async (state, ctx) => {
  const result = await tool(ctx, "refund", { id: state.id, amount: 10 }, async () => {
    const answer = await approve(ctx, {
      title: "Refund 10?",
      toolCallId: "task:tool:0",
      params: { id: state.id },
    });
    return answer.approved ? "refunded" : "kept";
  });
  return { reply: result };
});

const failing = createGraph<{ reply?: string }>("failing").node("n", async (_state, ctx) => {
  try {
    await tool(ctx, "lookup", { sku: "X-1" }, () => {
      throw Object.assign(new Error("upstream answered 503"), { code: "unavailable" });
    });
  } catch (error) {
    return { reply: `fell back after: ${(error as Error).message}` };
  }
  return { reply: "unexpected" };
});

/** The reducer's tool calls must be exactly the journal's cards: one per id, same name, arguments, result. */
function assertMatchesJournal(messages: readonly Message[], frames: readonly Frame[]): void {
  const cards = applyToolCards(frames);
  const calls = messages.flatMap((message) =>
    message.role === "assistant" ? (message.toolCalls ?? []) : [],
  );
  assert.deepEqual(
    calls.map((call) => call.id).sort(),
    [...cards.keys()].sort(),
    "one tool call per journal card, none doubled",
  );
  for (const call of calls) {
    const card = cards.get(call.id) as Record<string, unknown>;
    assert.equal(call.function.name, card.name);
    assert.deepEqual(JSON.parse(call.function.arguments), card.params, `arguments of ${call.id}`);
    const results = messages.filter((message) => message.role === "tool" && message.toolCallId === call.id);
    if (card.status === "completed") {
      assert.equal(results.length, 1, `one result for ${call.id}`);
      assert.deepEqual(JSON.parse(String(results[0]?.content)), card.result);
    } else if (card.status === "error") {
      assert.equal(results.length, 1);
      assert.deepEqual(JSON.parse(String(results[0]?.content)), { error: card.error });
    } else if (card.status === "cancelled") {
      assert.equal(results.length, 1);
      assert.equal((JSON.parse(String(results[0]?.content)) as { cancelled: boolean }).cancelled, true);
    } else if (card.status === "declined") {
      assert.equal(results.length, 1);
      assert.equal((JSON.parse(String(results[0]?.content)) as { declined: boolean }).declined, true);
    } else {
      assert.equal(results.length, 0, `${call.id} is ${String(card.status)}: no result yet`);
    }
  }
}

// One store, runner and server for every test in this file.
let temp: TempStore;
let runner: Runner;
let server: DurableServer;
before(async () => {
  temp = tempSqliteStore();
  runner = createRunner({
    store: temp.store,
    graphs: [payments, refunds, failing, slow],
    pollIntervalMs: 25,
  });
  server = await serveDurable({ runner });
});
after(async () => {
  await server.close();
  await runner.idle();
  await temp.cleanup();
});

const agentFor = (graph: string, threadId: string, state: object) =>
  new HttpAgent({ url: `${server.url}/ag-ui/${graph}`, threadId, initialState: state });

describe("AG-UI: @ag-ui/client's HttpAgent drives a durable run", () => {
  test("pause for approval, resume approved: two AG-UI runs on one thread, each verified, the reducer equals the journal", async () => {
    const agent = agentFor("payments", "pay-approve", { amount: 10 });
    const first = await verified(await drive(agent, { runId: "client-run-1" }));
    assert.deepEqual(
      first.filter((event) => event.type.startsWith("STEP")).map((event) => event.type),
      ["STEP_STARTED", "STEP_FINISHED", "STEP_STARTED", "STEP_FINISHED"],
    );
    const finished = first.at(-1) as unknown as { type: string; runId: string; outcome: { type: string } };
    assert.equal(finished.type, "RUN_FINISHED");
    assert.equal(finished.runId, "client-run-1");
    assert.equal(finished.outcome.type, "interrupt");
    const [pending] = agent.pendingInterrupts;
    assert.ok(pending !== undefined);
    assert.equal(agent.pendingInterrupts.length, 1);
    assert.equal(pending.reason, "tool_approval");
    assert.equal(pending.toolCallId, "pay:tool:0");
    assert.equal(pending.message, "Run charge?");
    // What the package adds travels in metadata, which the client keeps (nothing stripped).
    assert.deepEqual((pending.metadata as { request: { params: unknown } }).request.params, { amount: 10 });
    assert.deepEqual(charged, []);

    const second = await verified(
      await drive(agent, {
        runId: "client-run-2",
        resume: [{ interruptId: pending.id, status: "resolved", payload: { approved: true } }],
      }),
    );
    const started = second[0] as unknown as { type: string; runId: string; threadId: string };
    assert.deepEqual(
      [started.type, started.runId, started.threadId],
      ["RUN_STARTED", "client-run-2", "pay-approve"],
    );
    assert.equal((second.at(-1) as unknown as { outcome: { type: string } }).outcome.type, "success");
    assert.deepEqual(charged, [10]);
    assert.deepEqual(agent.pendingInterrupts, []);
    assertMatchesJournal(agent.messages, await runner.frames("pay-approve"));
    assert.deepEqual(
      agent.messages.find((message) => message.role === "tool" && message.toolCallId === "pay:tool:0")
        ?.content,
      JSON.stringify({ charged: 10 }),
    );
  });

  test("a tool whose fn paused is announced once: its arguments are not doubled after the resume", async () => {
    const agent = agentFor("refunds", "refund-once", { id: "ORD-1" });
    await verified(await drive(agent));
    const [pending] = agent.pendingInterrupts;
    assert.ok(pending !== undefined);
    await verified(
      await drive(agent, {
        resume: [{ interruptId: pending.id, status: "resolved", payload: { approved: true } }],
      }),
    );
    const frames = await runner.frames("refund-once");
    const runningFrames = frames.filter(
      (frame) => frame.type === "tool_call" && (frame.data as { status: string }).status === "running",
    );
    assert.equal(
      runningFrames.length,
      2,
      "the journal shows the call running twice (before and after the pause)",
    );
    const call = agent.messages.flatMap((message) =>
      message.role === "assistant" ? (message.toolCalls ?? []) : [],
    );
    assert.equal(call.length, 1);
    assert.equal(call[0]?.function.arguments, JSON.stringify({ id: "ORD-1", amount: 10 }));
    assertMatchesJournal(agent.messages, frames);
  });

  test("rejected with a reason: the tool never runs and the model's result carries the reason", async () => {
    const agent = agentFor("payments", "pay-reject", { amount: 99 });
    await verified(await drive(agent));
    const [pending] = agent.pendingInterrupts;
    assert.ok(pending !== undefined);
    const events = await verified(
      await drive(agent, {
        resume: [
          {
            interruptId: pending.id,
            status: "resolved",
            payload: { approved: false, reason: "over the limit" },
          },
        ],
      }),
    );
    assert.equal((events.at(-1) as unknown as { outcome: { type: string } }).outcome.type, "success");
    assert.ok(!charged.includes(99));
    const snapshot = await runner.get<PayState>("pay-reject");
    assert.deepEqual(snapshot?.state.reply, { declined: true, reason: "over the limit" });
    const result = agent.messages.find(
      (message) => message.role === "tool" && message.toolCallId === "pay:tool:0",
    );
    assert.deepEqual(JSON.parse(String(result?.content)), { declined: true, reason: "over the limit" });
    assertMatchesJournal(agent.messages, await runner.frames("pay-reject"));
  });
});

describe("AG-UI: HttpAgent: edited arguments and cancelling", () => {
  test("approved with edited arguments: the reducer ends with the edited arguments, once, as the journal has them", async () => {
    const agent = agentFor("payments", "pay-edit", { amount: 70 });
    await verified(await drive(agent));
    const [pending] = agent.pendingInterrupts;
    assert.ok(pending !== undefined);
    assert.deepEqual(
      (pending.responseSchema as { properties: { editedArgs: { properties: unknown } } }).properties
        .editedArgs.properties,
      { amount: { type: "number", maximum: 100 } },
    );
    // An edit the tool's schema refuses: an error before anything runs, the interrupt still open.
    await assert.rejects(
      agent.runAgent({
        resume: [
          {
            interruptId: pending.id,
            status: "resolved",
            payload: { approved: true, editedArgs: { amount: 500 } },
          },
        ],
      }),
    );
    assert.equal((await runner.get("pay-edit"))?.status, "paused");
    const events = await verified(
      await drive(agent, {
        resume: [
          {
            interruptId: pending.id,
            status: "resolved",
            payload: { approved: true, editedArgs: { amount: 7 } },
          },
        ],
      }),
    );
    assert.ok(events.some((event) => event.type === "MESSAGES_SNAPSHOT"));
    assert.ok(charged.includes(7) && !charged.includes(70));
    const calls = agent.messages.flatMap((message) =>
      message.role === "assistant" ? (message.toolCalls ?? []) : [],
    );
    assert.deepEqual(
      calls.find((call) => call.id === "pay:tool:0")?.function.arguments,
      JSON.stringify({ amount: 7 }),
    );
    assertMatchesJournal(agent.messages, await runner.frames("pay-edit"));
  });

  test("a resume entry with status cancelled declines the call", async () => {
    const agent = agentFor("payments", "pay-cancel-entry", { amount: 3 });
    await verified(await drive(agent));
    const [pending] = agent.pendingInterrupts;
    assert.ok(pending !== undefined);
    await verified(await drive(agent, { resume: [{ interruptId: pending.id, status: "cancelled" }] }));
    assert.ok(!charged.includes(3));
    const reply = (await runner.get<PayState>("pay-cancel-entry"))?.state.reply as { declined: boolean };
    assert.equal(reply.declined, true);
    assertMatchesJournal(agent.messages, await runner.frames("pay-cancel-entry"));
  });

  test("cancelled while running: the stream ends with RUN_FINISHED outcome cancelled, the step's signal aborted", async () => {
    waiting.length = 0;
    const agent = agentFor("slow", "cancel-running", {});
    const driving = drive(agent);
    while (waiting.length === 0) await sleep(5);
    const response = await fetch(`${server.url}/runs/cancel-running/cancel`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ reason: "user pressed stop" }),
    });
    assert.equal(response.status, 200);
    const events = await verified(await driving);
    assert.deepEqual((events.at(-1) as unknown as { outcome: unknown }).outcome, { type: "cancelled" });
    assert.equal(waiting[0]?.aborted, true);
    const result = agent.messages.find((message) => message.role === "tool");
    assert.deepEqual(JSON.parse(String(result?.content)), { cancelled: true, reason: "user pressed stop" });
    assertMatchesJournal(agent.messages, await runner.frames("cancel-running"));
  });

  test("cancelled while paused: the thread's stream tells it in an AG-UI run of its own, and verifies", async () => {
    const agent = agentFor("payments", "cancel-paused", { amount: 4 });
    await drive(agent);
    await runner.cancel("cancel-paused", "expired offer");
    const whole = await readEvents(`${server.url}/ag-ui/threads/cancel-paused/events`);
    const events = await verified(whole.map((entry) => entry.event));
    assert.deepEqual((events.at(-1) as unknown as { outcome: unknown }).outcome, { type: "cancelled" });
    assert.equal(events.filter((event) => event.type === "RUN_STARTED").length, 2);
  });
});

describe("AG-UI: HttpAgent: later turns, failures and reconnects", () => {
  test("a second turn on a finished thread is a new run: state carried, tool calls not confused with the first turn's", async () => {
    const agent = agentFor("payments", "two-turns", { amount: 1 });
    await drive(agent);
    let [pending] = agent.pendingInterrupts;
    await drive(agent, {
      resume: [{ interruptId: pending?.id ?? "", status: "resolved", payload: { approved: true } }],
    });
    agent.setState({ amount: 2 });
    const third = await verified(await drive(agent));
    assert.equal((third.at(-1) as unknown as { outcome: { type: string } }).outcome.type, "interrupt");
    [pending] = agent.pendingInterrupts;
    assert.equal(pending?.toolCallId, "pay:tool:1");
    await verified(
      await drive(agent, {
        resume: [{ interruptId: pending?.id ?? "", status: "resolved", payload: { approved: true } }],
      }),
    );
    assert.deepEqual(
      (await runner.runs("two-turns")).map((run) => run.status),
      ["completed", "completed"],
    );
    assert.equal((await runner.get<PayState>("two-turns"))?.state.amount, 2);
    assertMatchesJournal(agent.messages, await runner.frames("two-turns"));
    const whole = await readEvents(`${server.url}/ag-ui/threads/two-turns/events`);
    await verified(whole.map((entry) => entry.event));
  });

  test("a failing tool: its result carries the error, the run goes on to success", async () => {
    const agent = agentFor("failing", "tool-error", {});
    const events = await verified(await drive(agent));
    assert.equal((events.at(-1) as unknown as { outcome: { type: string } }).outcome.type, "success");
    const result = agent.messages.find((message) => message.role === "tool");
    assert.deepEqual(JSON.parse(String(result?.content)), { error: "upstream answered 503" });
    assert.equal(
      (agent.state as { reply?: string }).reply,
      "fell back after: upstream answered 503",
      "the run's state reaches the client (STATE_SNAPSHOT, STATE_DELTA)",
    );
    assert.equal(
      (await runner.get<{ reply: string }>("tool-error"))?.state.reply,
      "fell back after: upstream answered 503",
    );
    assertMatchesJournal(agent.messages, await runner.frames("tool-error"));
  });

  test("each SSE event has its own id; a reconnect in the middle of a frame resumes at the next event", async () => {
    const agent = agentFor("payments", "reconnect", { amount: 5 });
    await drive(agent);
    const [pending] = agent.pendingInterrupts;
    assert.ok(pending !== undefined);
    await drive(agent, {
      resume: [{ interruptId: pending.id, status: "resolved", payload: { approved: true } }],
    });
    const url = `${server.url}/ag-ui/threads/reconnect/events`;
    const whole = await readEvents(url);
    assert.equal(new Set(whole.map((entry) => entry.id)).size, whole.length, "ids are unique");
    // Cut right after TOOL_CALL_START: the frame it came from has ARGS and END still to send.
    const cut = whole.findIndex((entry) => entry.event.type === "TOOL_CALL_START") + 1;
    assert.ok(cut > 0);
    assert.equal(
      whole[cut - 1]?.id.split(".")[0],
      whole[cut]?.id.split(".")[0],
      "the cut falls inside one frame",
    );
    const head = await readEvents(url, {}, cut);
    const tail = await readEvents(url, { headers: { "last-event-id": head.at(-1)?.id ?? "" } });
    assert.deepEqual([...head, ...tail], whole);
    // The whole thread (two AG-UI runs back to back) passes the client's verifier.
    const all = await verified(whole.map((entry) => entry.event));
    assert.deepEqual(all.filter((event) => event.type === "RUN_STARTED").length, 2);
  });
});
