/**
 * The durable client sends a call the server refused 429 again by itself (ADR 0120), against the real
 * server with one place per tenant (ADR 0118) held by a slow body or an open stream, counting what the
 * server saw (each request passes `authenticate` once): a refused start waits out `Retry-After` and goes
 * through once the place frees, starting one run; with the place kept it gives up after `maxRetries`
 * with the server's `too_many_requests`, retryable, saying how many sends were refused; `maxRetries: 0`
 * sends once; a 404, a 409 and a 500 are sent once; an abort while it waits ends the call at once with
 * `aborted`, and the call's deadline stops the retries before it; a refused `frames` stream connects
 * again and follows the run once a stream's place frees.
 */
import assert from "node:assert/strict";
import { type ClientRequest, request } from "node:http";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { ToolAbortedError, ToolError } from "@tackle/core";
import { createGraph, createMemoryStore, createRunner, type Runner } from "@tackle/durable";
import { createDurableClient, type DurableServer, serveDurable } from "@tackle/durable/http";
import { promptlyMs } from "@tackle/test-support";

const gates = new Map<string, () => void>();
const held = createGraph<{ key: string; done?: boolean }>("held").node("wait", async (state, ctx) => {
  await ctx.step("wait", () => new Promise<void>((resolve) => gates.set(state.key, resolve)));
  return { done: true };
});

let runner: Runner;
let server: DurableServer;
/** What the server saw: `<tenant> <method> <path>`, one per request. */
const seen: string[] = [];
const open: ClientRequest[] = [];
const streams: AbortController[] = [];
before(async () => {
  runner = createRunner({ store: createMemoryStore(), graphs: [held] });
  server = await serveDurable({
    runner,
    maxInFlight: 1,
    maxStreams: 1,
    authenticate: (request) => {
      const tenant = request.headers.get("x-tenant") ?? undefined;
      seen.push(`${tenant} ${request.method} ${new URL(request.url).pathname}`);
      if (tenant === "broken") throw new Error("the credential store is down");
      return tenant;
    },
  });
});
after(async () => {
  for (const slow of open) slow.destroy();
  for (const stream of streams) stream.abort();
  for (const gate of gates.values()) gate();
  await server.close();
  await runner.close();
});

const client = (tenant: string, options: { maxRetries?: number; timeoutMs?: number } = {}) =>
  createDurableClient({ baseUrl: server.url, headers: { "x-tenant": tenant }, ...options });
const count = (line: string) => seen.filter((request) => request === line).length;

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let attempt = 0; attempt < 250; attempt += 1) {
    if (await check()) return;
    await sleep(20);
  }
  assert.fail(`timed out waiting for ${what}`);
}

/** A start whose body never finishes: it holds the tenant's one place until destroyed. */
async function holdPlace(tenant: string): Promise<ClientRequest> {
  const url = new URL(`${server.url}/runs`);
  const slow = request({
    host: url.hostname,
    port: url.port,
    path: url.pathname,
    method: "POST",
    headers: { "x-tenant": tenant, "content-type": "application/json", "content-length": 100_000 },
  });
  slow.on("error", () => undefined);
  slow.write('{"graph":');
  open.push(slow);
  // Held once a request of the tenant's is refused (probes on a path of their own).
  await until(async () => {
    const probe = await fetch(`${server.url}/runs/probe`, { headers: { "x-tenant": tenant } });
    await probe.body?.cancel();
    return probe.status === 429;
  }, "the slow body holding the place");
  return slow;
}

/** The run's frames as SSE, holding the tenant's one stream place until dropped. */
async function holdStream(tenant: string, threadId: string): Promise<AbortController> {
  const controller = new AbortController();
  streams.push(controller);
  const response = await fetch(`${server.url}/runs/${threadId}/frames`, {
    headers: { "x-tenant": tenant, accept: "text/event-stream" },
    signal: controller.signal,
  });
  assert.equal(response.status, 200);
  return controller;
}

it("sends a refused start again after Retry-After: it goes through once the place frees and starts one run", async () => {
  const slow = await holdPlace("a");
  const started = performance.now();
  const call = client("a").start("held", { key: "a-key" });
  await until(() => count("a POST /runs") === 2, "the refused start reaching the server"); // the slow one too
  slow.destroy();

  const { threadId } = await call;
  const elapsed = performance.now() - started;
  assert.equal(count("a POST /runs"), 3, "the slow body, the refused start and the one sent again");
  assert.ok(elapsed >= 1000, `sent again after Retry-After: 1 (${Math.round(elapsed)} ms)`);
  assert.equal((await runner.runs(`a/${threadId}`)).length, 1);
  await until(() => gates.has("a-key"), "the one run driving");
  const threads = await runner.threads({ limit: 100 });
  assert.equal(threads.filter((thread) => thread.threadId.startsWith("a/")).length, 1, "one run started");
});

it("gives up after maxRetries with the server's retryable too_many_requests; 0 sends once; only a 429 is sent again", async () => {
  const slow = await holdPlace("b");
  const started = performance.now();
  await assert.rejects(client("b").get("t-b"), (error: unknown) => {
    assert.ok(ToolError.isInstance(error));
    assert.equal(error.code, "too_many_requests");
    assert.equal(error.retryable, true);
    assert.match(error.message, /refused 3 times/);
    assert.deepEqual(error.data, { inFlight: 1, max: 1, retryAfterSeconds: 1, attempts: 3 });
    return true;
  });
  assert.equal(count("b GET /runs/t-b"), 3, "the first send and two retries (the default)");
  assert.ok(performance.now() - started >= 2000, "each after Retry-After");

  const once = performance.now();
  await assert.rejects(
    client("b", { maxRetries: 0 }).get("t-b0"),
    (error: unknown) => ToolError.isInstance(error) && error.code === "too_many_requests",
  );
  assert.equal(count("b GET /runs/t-b0"), 1, "maxRetries: 0 sends once");
  assert.ok(performance.now() - once < promptlyMs, "and answers at once");
  slow.destroy();

  // Errors that are not 429 go to the caller at once, sent once.
  await until(
    async () => (await fetch(`${server.url}/runs/probe`, { headers: { "x-tenant": "b" } })).status === 404,
    "the place back",
  );
  await assert.rejects(
    client("b").get("t-missing"),
    (error: unknown) => ToolError.isInstance(error) && error.code === "not_found",
  );
  assert.equal(count("b GET /runs/t-missing"), 1, "a 404 is sent once");
  await client("b").start("held", { key: "b-key" }, { threadId: "t-taken" });
  await assert.rejects(
    client("b").start("held", { key: "b-key-2" }, { threadId: "t-taken" }),
    (error: unknown) => ToolError.isInstance(error) && error.code === "thread_active",
  );
  assert.equal(count("b POST /runs"), 3, "the slow body and two starts: a 409 is sent once");
  await assert.rejects(client("broken").start("held", { key: "x" }), (error: unknown) => {
    assert.ok(ToolError.isInstance(error));
    assert.equal(error.code, "internal");
    return true;
  });
  assert.equal(count("broken POST /runs"), 1, "a 500 is sent once");
  // The 500's body has the error shape the README lists, and never the thrown error's text.
  const raw = await fetch(`${server.url}/runs/t-any`, { headers: { "x-tenant": "broken" } });
  assert.equal(raw.status, 500);
  assert.deepEqual(await raw.json(), {
    error: { code: "internal", message: "Internal error", retryable: false },
  });
});

it("ends a call waiting to send again at once when its signal aborts, and stops retrying before its deadline", async () => {
  await holdPlace("c");
  const controller = new AbortController();
  const call = client("c").get("t-c", { signal: controller.signal });
  call.catch(() => undefined);
  await until(() => count("c GET /runs/t-c") === 1, "the refusal");
  const aborted = performance.now();
  controller.abort();
  await assert.rejects(
    call,
    (error: unknown) => ToolAbortedError.isInstance(error) && error.code === "aborted",
  );
  assert.ok(performance.now() - aborted < promptlyMs, "rejected at once");
  await sleep(1_500);
  assert.equal(count("c GET /runs/t-c"), 1, "nothing sent after the abort");

  // 2 s of time limit: the first retry after ~1 s fits, a second would end past the deadline.
  const started = performance.now();
  await assert.rejects(client("c", { timeoutMs: 2_000, maxRetries: 5 }).get("t-c2"), (error: unknown) => {
    assert.ok(ToolError.isInstance(error));
    assert.equal(error.code, "too_many_requests", "the refusal, not a timeout");
    assert.equal((error.data as { attempts: number }).attempts, 2);
    return true;
  });
  assert.ok(performance.now() - started < 2_000, "answered before the deadline");
  assert.equal(count("c GET /runs/t-c2"), 2);
});

it("connects a refused frames stream again and follows the run once a stream's place frees; gives up after maxRetries", async () => {
  const { threadId } = await client("d").start("held", { key: "d-key" });
  await until(() => gates.has("d-key"), "the run driving");
  const holder = await holdStream("d", threadId);

  const line = `d GET /runs/${threadId}/frames`;
  await assert.rejects(
    (async () => {
      for await (const _ of client("d", { maxRetries: 1 }).frames(threadId));
    })(),
    (error: unknown) =>
      ToolError.isInstance(error) &&
      error.code === "too_many_requests" &&
      (error.data as { attempts: number }).attempts === 2,
  );
  assert.equal(count(line), 3, "the holder, the refused connection and the one retry");

  const types: string[] = [];
  const following = (async () => {
    for await (const frame of client("d").frames(threadId)) types.push(frame.type);
  })();
  await until(() => count(line) === 4, "the next refusal");
  holder.abort();
  await until(() => count(line) === 5, "the stream connecting again");
  gates.get("d-key")?.();
  await following;
  assert.ok(types.length > 0, "the run's frames came");
  assert.equal(count(line), 5, "one refusal, one admitted stream");
  assert.equal((await runner.get(`d/${threadId}`))?.status, "completed");
});
