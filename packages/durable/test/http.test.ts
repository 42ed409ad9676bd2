/** The HTTP API over a real server on loopback, with the client, SSE resumption and AG-UI encoding. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { EventSchema } from "@ag-ui/core/schemas";
import { isNotFound } from "@tackle/core";
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
import { openKeptAliveSocket } from "@tackle/test-support";
import { applyToolCards, type TempStore, tempSqliteStore } from "./helpers.ts";

const refunds: number[] = [];
const graph = createGraph<{ id: string; reply?: string }>("refund").node("task", async (state, ctx) => {
  const order = await tool(ctx, "get_order", { id: state.id }, () => ({ id: state.id, total: 249.9 }));
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

// Set by the /http block's hooks below, read by the tests its functions register.
let temp: TempStore;
let runner: Runner;
let server: DurableServer;

describe("/http", () => {
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

  streamTests();
  errorTests();
  boundaryTests();
});

/** Starting, streaming, resuming and reconnecting over HTTP. */
function streamTests(): void {
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

  test("the client reconnects a dropped stream from the last seq it saw, with no gap and no duplicate", async () => {
    const plain = createDurableClient({ baseUrl: server.url });
    const { threadId } = await plain.start("refund", { id: "ORD-3" });
    const expected = await collect(plain.frames(threadId));
    const asked: string[] = [];
    let drops = 0;
    // A network that cuts the first two frame streams after their first chunk.
    const flaky: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      const lastEventId = new Headers(init?.headers).get("last-event-id");
      if (!String(input).endsWith("/frames") || response.body === null) return response;
      asked.push(lastEventId ?? "");
      if (drops >= 2) return response;
      drops++;
      const reader = response.body.getReader();
      let text = "";
      while (!/\ndata: [^\n]*\n\n/.test(text)) {
        const chunk = await reader.read();
        if (chunk.done) break;
        text += new TextDecoder().decode(chunk.value);
      }
      await reader.cancel();
      const firstEvent = text.slice(0, text.search(/\ndata: [^\n]*\n\n/) + 1);
      let sent = false;
      const cut = new ReadableStream<Uint8Array>({
        // One whole event, then fail like a dropped socket (on the next read, so the event is delivered).
        pull(controller) {
          if (sent) return controller.error(new TypeError("socket hang up"));
          sent = true;
          controller.enqueue(
            new TextEncoder().encode(`${firstEvent}${text.slice(firstEvent.length).split("\n\n")[0]}\n\n`),
          );
        },
      });
      return new Response(cut, { status: 200, headers: response.headers });
    };
    const client = createDurableClient({ baseUrl: server.url, fetch: flaky, reconnectDelayMs: 10 });
    const received = await collect(client.frames(threadId));
    assert.deepEqual(
      received.map((frame) => frame.seq),
      expected.map((frame) => frame.seq),
    );
    assert.deepEqual(asked, ["0", "1", "2"]);
  });
}

/** What the wire carries: AG-UI events, and errors coded with their status. */
function errorTests(): void {
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
    assert.equal(interrupted?.outcome.interrupts[0].reason, "tool_approval");
    assert.equal(events.at(-1)?.outcome?.type, "success");
    // Every RUN_FINISHED is followed by nothing or by a new RUN_STARTED: the resume opens the next run.
    const lifecycle = types.filter((type) => type === "RUN_STARTED" || type === "RUN_FINISHED");
    assert.deepEqual(lifecycle, ["RUN_STARTED", "RUN_FINISHED", "RUN_STARTED", "RUN_FINISHED"]);
  });

  test("errors come back coded with their HTTP status, never a stack", async () => {
    const client = createDurableClient({ baseUrl: server.url });
    await assert.rejects(client.get("missing"), (error) => {
      assert.ok(isNotFound(error, "run"), "a missing thread is `not_found` with resource `run` (ADR 0027)");
      assert.deepEqual((error as DurableError).data, { resource: "run", id: "missing" });
      return true;
    });
    const { threadId } = await client.start("refund", { id: "ORD-1" });
    await collect(client.frames(threadId));
    await assert.rejects(
      client.resume(threadId, { nope: true }),
      (error) => (error as DurableError).code === "unknown_interrupt",
    );
    const json = { "content-type": "application/json" };
    const duplicate = await fetch(`${server.url}/runs`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ graph: "refund", threadId, input: {} }),
    });
    assert.equal(duplicate.status, 409);
    const bare = await fetch(`${server.url}/runs/${threadId}/resume`, {
      method: "POST",
      headers: json,
      body: "{}",
    });
    assert.equal(bare.status, 400, "an empty resume never takes a run over by accident");
    const broken = await fetch(`${server.url}/runs`, { method: "POST", headers: json, body: "{not json" });
    assert.equal(broken.status, 400);
    assert.deepEqual(Object.keys(((await broken.json()) as { error: object }).error).sort(), [
      "code",
      "message",
      "retryable",
    ]);
    assert.equal((await fetch(`${server.url}/runs/missing/frames`)).status, 404);
    // Legal JSON under the body limit, nested 200,000 levels: refused by name, not a 500.
    const nested = `${"[".repeat(200_000)}${"]".repeat(200_000)}`;
    const deep = await fetch(`${server.url}/runs`, {
      method: "POST",
      headers: json,
      body: `{"graph":"refund","input":{"id":"ORD-2","notes":${nested}}}`,
    });
    assert.equal(deep.status, 400);
    const { error } = (await deep.json()) as { error: { code: string; message: string } };
    assert.equal(error.code, "not_serializable");
    assert.match(error.message, /nested more than 512 levels/);
  });
}

/** Who may reach the server, and where it binds. */
function boundaryTests(): void {
  test("a cross-site page or a rebound DNS name can neither start nor approve a run", async () => {
    const { threadId } = await createDurableClient({ baseUrl: server.url }).start("refund", { id: "ORD-9" });
    const before = await createDurableClient({ baseUrl: server.url }).get(threadId);
    const attempts = [
      // A page on another origin: text/plain needs no CORS preflight, so only the server can refuse it.
      { headers: { origin: "http://evil.example", "content-type": "text/plain" }, status: 403 },
      { headers: { origin: "http://evil.example", "content-type": "application/json" }, status: 403 },
      // A loopback origin but a body type a form can send.
      { headers: { "content-type": "text/plain" }, status: 415 },
    ];
    for (const attempt of attempts) {
      const started = await fetch(`${server.url}/runs`, {
        method: "POST",
        headers: attempt.headers,
        body: JSON.stringify({ graph: "refund", threadId: `forged-${attempt.status}`, input: {} }),
      });
      assert.equal(started.status, attempt.status);
      const resumed = await fetch(`${server.url}/runs/${threadId}/resume`, {
        method: "POST",
        headers: attempt.headers,
        body: JSON.stringify({ answers: { anything: true } }),
      });
      assert.equal(resumed.status, attempt.status);
    }
    // A raw request whose Host names another site (DNS rebinding) is refused too.
    const { request } = await import("node:http");
    const rebound = await new Promise<number>((resolve, reject) => {
      const url = new URL(`${server.url}/runs/${threadId}`);
      request(
        { host: url.hostname, port: url.port, path: url.pathname, headers: { host: "rebind.evil.example" } },
        (response) => {
          response.resume();
          resolve(response.statusCode ?? 0);
        },
      )
        .on("error", reject)
        .end();
    });
    assert.equal(rebound, 403);
    const client = createDurableClient({ baseUrl: server.url });
    await assert.rejects(client.get("forged-403"), (error) => (error as DurableError).code === "not_found");
    await assert.rejects(client.get("forged-415"), (error) => (error as DurableError).code === "not_found");
    assert.deepEqual((await client.get(threadId)).status, before.status, "the paused run was not resumed");
  });

  test("a port already taken is a typed error, not a crash", async () => {
    const taken = Number(new URL(server.url).port);
    await assert.rejects(
      serveDurable({ runner, port: taken }),
      (error) =>
        DurableError.isInstance(error) && error.code === "listen_failed" && /EADDRINUSE/.test(error.message),
    );
    await assert.rejects(serveDurable({ runner, hostname: "127.attacker.example" }), /loopback only/);
  });

  test("the server binds loopback only", async () => {
    await assert.rejects(
      serveDurable({ runner, hostname: "0.0.0.0" }),
      (error) => DurableError.isInstance(error) && /loopback only/.test(error.message),
    );
  });
}

describe("/http tenancy", () => {
  let temp: TempStore;
  let runner: Runner;
  let server: DurableServer;
  const tokens: Record<string, string> = { "token-a": "acme", "token-b": "globex" };
  before(async () => {
    temp = tempSqliteStore();
    runner = createRunner({ store: temp.store, graphs: [graph], pollIntervalMs: 50 });
    server = await serveDurable({
      runner,
      authenticate: (request) => tokens[(request.headers.get("authorization") ?? "").replace(/^Bearer /, "")],
    });
  });
  after(async () => {
    await server.close();
    await runner.idle();
    await temp.cleanup();
  });

  test("two tenants using the same thread id at once never see each other's runs", async () => {
    const acme = createDurableClient({ baseUrl: server.url, headers: { authorization: "Bearer token-a" } });
    const globex = createDurableClient({ baseUrl: server.url, headers: { authorization: "Bearer token-b" } });
    const ids = Array.from({ length: 5 }, (_, index) => `order-${index}`);
    await Promise.all(
      ids.flatMap((id) => [
        acme.start("refund", { id: `A-${id}` }, { threadId: id }),
        globex.start("refund", { id: `G-${id}` }, { threadId: id }),
      ]),
    );
    await Promise.all(ids.flatMap((id) => [collect(acme.frames(id)), collect(globex.frames(id))]));
    for (const id of ids) {
      const [mine, theirs] = await Promise.all([acme.get(id), globex.get(id)]);
      assert.equal(mine.threadId, id);
      assert.equal(mine.state.id, `A-${id}`);
      assert.equal(theirs.state.id, `G-${id}`);
      const framesA = JSON.stringify(await collect(acme.frames(id)));
      assert.ok(!framesA.includes("G-"), "a tenant's frames never carry the other's data");
    }
    // Answering another tenant's interrupt is answering nothing of yours.
    const globexRun = await globex.get("order-0");
    await assert.rejects(
      acme.resume("order-0", { [globexRun.interrupts[0]?.id ?? ""]: true }),
      (error) => (error as DurableError).code === "unknown_interrupt",
    );
    await assert.rejects(acme.get("missing"), (error) => (error as DurableError).code === "not_found");
  });

  test("a caller without credentials gets 401, and thread ids cannot climb into another tenant", async () => {
    assert.equal((await fetch(`${server.url}/runs/order-0`)).status, 401);
    const sneaky = await fetch(`${server.url}/runs/${encodeURIComponent("../globex/order-0")}`, {
      headers: { authorization: "Bearer token-a" },
    });
    assert.equal(sneaky.status, 400);
  });

  test("holds an idle kept-alive connection well past the timeout it advertises, so a late reuse is answered", async () => {
    const socket = await openKeptAliveSocket(server.url);
    try {
      const ask = () => socket.ask("/no-such-route");
      const first = await ask();
      assert.match(first, /^HTTP\/1\.1 4\d\d/);
      assert.match(first, /\r\nkeep-alive: timeout=5\r\n/i);
      await sleep(6_500);
      assert.equal(socket.closed, false, "the server closed the idle connection");
      assert.match(await ask(), /^HTTP\/1\.1 4\d\d/);
    } finally {
      socket.destroy();
    }
  });
});
