/**
 * A tenant holds at most `maxInFlight` requests and `maxStreams` event streams on the server at once
 * (ADR 0118): past either, 429 `too_many_requests` with `Retry-After`, before the body is read (a
 * chunked one too, which the body limit would read whole if it came first); the two are counted apart,
 * so streams waiting on a run are admitted while slow bodies fill the requests' places and the other
 * way round; another tenant is untouched; places come back when requests end or their clients go, and
 * when streams end or are dropped.
 */
import assert from "node:assert/strict";
import { type ClientRequest, request } from "node:http";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createGraph, createMemoryStore, createRunner, type Runner } from "@tackle/durable";
import { type DurableServer, serveDurable } from "@tackle/durable/http";

const gates = new Map<string, () => void>();
const held = createGraph<{ key: string; done?: boolean }>("held").node("wait", async (state, ctx) => {
  await ctx.step("wait", () => new Promise<void>((resolve) => gates.set(state.key, resolve)));
  return { done: true };
});

let runner: Runner;
let server: DurableServer;
const open: ClientRequest[] = [];
const streams: AbortController[] = [];
before(async () => {
  runner = createRunner({ store: createMemoryStore(), graphs: [held] });
  server = await serveDurable({
    runner,
    maxInFlight: 2,
    maxStreams: 2,
    authenticate: (request) => request.headers.get("x-tenant") ?? undefined,
  });
});
after(async () => {
  for (const slow of open) slow.destroy();
  for (const stream of streams) stream.abort();
  for (const gate of gates.values()) gate();
  await server.close();
  await runner.close();
});

const start = (tenant: string, threadId: string) =>
  fetch(`${server.url}/runs`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-tenant": tenant },
    body: JSON.stringify({ graph: "held", threadId, input: { key: `${tenant}/${threadId}` } }),
  });

/**
 * A start whose body has sent 9 bytes of 100 KB (or, `chunked`, of a length it never said): it stays in
 * flight until destroyed.
 */
function slowBody(tenant: string, chunked = false): ClientRequest {
  const url = new URL(`${server.url}/runs`);
  const slow = request({
    host: url.hostname,
    port: url.port,
    path: url.pathname,
    method: "POST",
    headers: {
      "x-tenant": tenant,
      "content-type": "application/json",
      ...(chunked ? {} : { "content-length": 100_000 }),
    },
  });
  slow.on("error", () => undefined);
  slow.write('{"graph":');
  open.push(slow);
  return slow;
}

/** The run's frames as SSE, open until the run rests or the stream is dropped (`drop()`). */
async function stream(tenant: string, threadId: string): Promise<Response & { drop(): void }> {
  const controller = new AbortController();
  streams.push(controller);
  const response = await fetch(`${server.url}/runs/${threadId}/frames`, {
    headers: { "x-tenant": tenant, accept: "text/event-stream" },
    signal: controller.signal,
  });
  return Object.assign(response, { drop: () => controller.abort() });
}

/** A stream of the run once a place is free for it (each refusal read and closed). */
async function admitted(tenant: string, threadId: string, what: string) {
  let admitted: Awaited<ReturnType<typeof stream>> | undefined;
  await until(async () => {
    const next = await stream(tenant, threadId);
    if (next.status === 200) admitted = next;
    else await next.body?.cancel();
    return admitted !== undefined;
  }, what);
  return admitted as Awaited<ReturnType<typeof stream>>;
}

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let attempt = 0; attempt < 250; attempt += 1) {
    if (await check()) return;
    await sleep(20);
  }
  assert.fail(`timed out waiting for ${what}`);
}

async function assertRefused(response: Response, what: RegExp): Promise<void> {
  assert.equal(response.status, 429);
  assert.equal(response.headers.get("retry-after"), "1");
  const { error } = (await response.json()) as {
    error: { code: string; message: string; retryable: boolean };
  };
  assert.equal(error.code, "too_many_requests");
  assert.equal(error.retryable, true);
  assert.match(error.message, what);
}

it("holds a tenant to two requests in flight: the third is refused with Retry-After, streams and another tenant go on, places come back", async () => {
  assert.equal((await start("a", "a-run")).status, 201);
  await until(() => gates.has("a/a-run"), "the run driving");
  const slow = [slowBody("a"), slowBody("a", true)];

  let refused: Response | undefined;
  for (let attempt = 0; attempt < 100 && refused === undefined; attempt += 1) {
    const response = await fetch(`${server.url}/runs/a-run`, { headers: { "x-tenant": "a" } });
    if (response.status === 429) refused = response;
    else {
      assert.equal(response.status, 200);
      await sleep(20);
    }
  }
  assert.ok(refused !== undefined, "the third request in flight was never refused");
  await assertRefused(refused, /2 requests of this caller are in flight/);
  await assertRefused(await start("a", "a-refused"), /in flight/);
  assert.equal(await runner.get("a/a-refused"), undefined, "a refused start stores nothing");

  // A stream on the tenant's running run holds a place of its own.
  const frames = await stream("a", "a-run");
  assert.equal(frames.status, 200);
  assert.match(frames.headers.get("content-type") ?? "", /text\/event-stream/);
  assert.equal((await start("b", "b-run")).status, 201, "another tenant is untouched");

  for (const request of slow) request.destroy();
  await until(async () => (await start("a", "a-after")).status === 201, "the places coming back");
  frames.drop();
});

it("holds a tenant to two event streams: the third is refused, requests go on, places come back when streams end or are dropped", async () => {
  assert.equal((await start("c", "c-run")).status, 201);
  await until(() => gates.has("c/c-run"), "the run driving");
  const first = await stream("c", "c-run");
  const second = await stream("c", "c-run");
  assert.deepEqual([first.status, second.status], [200, 200]);

  await assertRefused(await stream("c", "c-run"), /2 event streams of this caller are open/);
  assert.equal(
    (await fetch(`${server.url}/runs/c-run`, { headers: { "x-tenant": "c" } })).status,
    200,
    "a request is not refused for the streams",
  );
  assert.equal((await start("d", "d-run")).status, 201);
  assert.equal((await stream("d", "d-run")).status, 200, "another tenant's stream is untouched");

  // A client that drops its stream frees its place.
  first.drop();
  const third = await admitted("c", "c-run", "a dropped stream's place coming back");
  await assertRefused(await stream("c", "c-run"), /event streams/);
  // The AG-UI endpoint answers with a stream: it is refused too, before its body is read.
  await assertRefused(
    await fetch(`${server.url}/ag-ui/held`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-tenant": "c" },
      body: "{}",
    }),
    /event streams/,
  );

  // A stream that ends (its run completes) frees its place.
  gates.get("c/c-run")?.();
  await until(async () => (await runner.get("c/c-run"))?.status === "completed", "the run completing");
  await Promise.all([second.text(), third.text()]);
  assert.equal((await start("c", "c-next")).status, 201);
  await until(() => gates.has("c/c-next"), "the next run driving");
  await admitted("c", "c-next", "the ended streams' places coming back");
});
