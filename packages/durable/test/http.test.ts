/** The HTTP API over a real server on loopback, with the client, SSE resumption and AG-UI encoding. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { EventSchema } from "@ag-ui/core/schemas";
import {
  approve,
  createGraph,
  createRunner,
  DurableError,
  type Frame,
  type Runner,
  tool,
} from "@tackle/durable";
import { createDurableClient, type DurableServer, serveDurable } from "@tackle/durable/http";
import { applyToolCards, type TempStore, tempSqliteStore } from "./helpers.ts";

const refunds: number[] = [];
const graph = createGraph<{ id: string; reply?: string }>("refund").node("task", async (state, ctx) => {
  const order = await tool(ctx, "get_order", { id: state.id }, () => ({ total: 249.9 }));
  // The approval is asked from inside the tool's fn: the interrupt unwinds through the tool and HTTP.
  const result = await tool(ctx, "refund", { id: state.id, amount: order.total }, async () => {
    const answer = await approve(ctx, {
      title: `Refund ${order.total}?`,
      toolCallId: "task:tool:1",
      params: order,
    });
    if (!answer.approved) return "kept";
    refunds.push(order.total);
    return "refunded";
  });
  return { reply: result };
});

async function collect(iterable: AsyncIterable<Frame>): Promise<Frame[]> {
  const frames: Frame[] = [];
  for await (const frame of iterable) frames.push(frame);
  return frames;
}

describe("/http", () => {
  let temp: TempStore;
  let runner: Runner;
  let server: DurableServer;
  before(async () => {
    temp = tempSqliteStore();
    runner = createRunner({ store: temp.store, graphs: [graph], pollIntervalMs: 50 });
    server = await serveDurable({ runner });
  });
  after(async () => {
    await server.close();
    await runner.idle();
    await temp.cleanup();
  });

  test("HTTP layer: start, stream to the pause, resume, stream to the end; a pause is never an error", async () => {
    const client = createDurableClient({ baseUrl: server.url });
    const { threadId } = await client.start("refund", { id: "ORD-42" });
    const first = await collect(client.frames(threadId));
    assert.equal(first.at(-1)?.type, "interrupt");
    const cards = applyToolCards(first);
    assert.equal(cards.get("task:tool:1")?.status, "awaiting_approval");
    assert.ok(![...cards.values()].some((card) => card.status === "error"));
    const paused = await client.get(threadId);
    assert.equal(paused.status, "paused");
    assert.equal(paused.error, undefined);
    await client.resume(threadId, { [paused.interrupts[0]?.id ?? ""]: { approved: true } });
    const rest = await collect(client.frames(threadId, { afterSeq: first.at(-1)?.seq ?? 0 }));
    assert.equal(rest.at(-1)?.type, "run_completed");
    assert.equal(rest[0]?.seq, (first.at(-1)?.seq ?? 0) + 1);
    const all = applyToolCards([...first, ...rest]);
    assert.deepEqual([...all.keys()], ["task:tool:0", "task:tool:1"]);
    assert.equal(all.get("task:tool:1")?.result, "refunded");
    assert.equal((await client.get(threadId)).state.reply, "refunded");
    assert.deepEqual(refunds, [249.9]);
  });

  test("the SSE stream resumes after Last-Event-ID", async () => {
    const client = createDurableClient({ baseUrl: server.url });
    const { threadId } = await client.start("refund", { id: "ORD-7" });
    const all = await collect(client.frames(threadId));
    const response = await fetch(`${server.url}/runs/${threadId}/frames`, {
      headers: { "last-event-id": "3" },
    });
    const text = await response.text();
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((match) => Number(match[1]));
    assert.deepEqual(
      ids,
      all.filter((frame) => frame.seq > 3).map((frame) => frame.seq),
    );
  });

  test("frames as AG-UI events pass @ag-ui/core's own schemas", async () => {
    const client = createDurableClient({ baseUrl: server.url });
    const { threadId } = await client.start("refund", { id: "ORD-9" });
    await collect(client.frames(threadId));
    const paused = await client.get(threadId);
    await client.resume(threadId, { [paused.interrupts[0]?.id ?? ""]: true });
    await collect(client.frames(threadId));
    const text = await (await fetch(`${server.url}/runs/${threadId}/frames?format=ag-ui`)).text();
    const events = [...text.matchAll(/^data: (.*)$/gm)].map((match) => JSON.parse(match[1] as string));
    assert.ok(events.length > 8);
    for (const event of events) {
      const parsed = EventSchema.safeParse(event);
      assert.ok(parsed.success, `${JSON.stringify(event)}: ${parsed.error?.message}`);
    }
    const types = events.map((event) => event.type);
    assert.ok(types.includes("TOOL_CALL_START") && types.includes("TOOL_CALL_RESULT"));
    const interrupted = events.find(
      (event) => event.type === "RUN_FINISHED" && event.outcome?.type === "interrupt",
    );
    assert.equal(interrupted?.outcome.interrupts[0].reason, "approval");
    assert.equal(events.at(-1)?.outcome?.type, "success");
  });

  test("errors come back coded with their HTTP status, never a stack", async () => {
    const client = createDurableClient({ baseUrl: server.url });
    await assert.rejects(client.get("missing"), (error) => (error as DurableError).code === "unknown_run");
    const { threadId } = await client.start("refund", { id: "ORD-1" });
    await collect(client.frames(threadId));
    await assert.rejects(
      client.resume(threadId, { nope: true }),
      (error) => (error as DurableError).code === "unknown_interrupt",
    );
    const duplicate = await fetch(`${server.url}/runs`, {
      method: "POST",
      body: JSON.stringify({ graph: "refund", threadId, input: {} }),
    });
    assert.equal(duplicate.status, 409);
    const broken = await fetch(`${server.url}/runs`, { method: "POST", body: "{not json" });
    assert.equal(broken.status, 400);
    assert.deepEqual(Object.keys(((await broken.json()) as { error: object }).error).sort(), [
      "code",
      "message",
      "retryable",
    ]);
    assert.equal((await fetch(`${server.url}/runs/missing/frames`)).status, 404);
  });

  test("the server binds loopback only", async () => {
    await assert.rejects(
      serveDurable({ runner, hostname: "0.0.0.0" }),
      (error) => DurableError.isInstance(error) && /loopback only/.test(error.message),
    );
  });
});
