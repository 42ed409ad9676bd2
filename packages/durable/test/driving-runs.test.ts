/**
 * A tenant's starts and resumes over HTTP drive at most `maxDrivingRuns` runs at once: past it a start
 * is refused `too_many_runs` (429, retryable) and stores nothing; another tenant is untouched; a run
 * that ends or pauses frees its place (a paused run holds none).
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createGraph, createMemoryStore, createRunner, type Runner } from "@tackle/durable";
import { type DurableServer, serveDurable } from "@tackle/durable/http";

const gates = new Map<string, () => void>();
const held = createGraph<{ key: string; done?: boolean }>("held").node("wait", async (state, ctx) => {
  await ctx.step("wait", () => new Promise<void>((resolve) => gates.set(state.key, resolve)));
  return { done: true };
});
const asks = createGraph<{ answer?: unknown }>("asks").node("ask", async (_state, ctx) => ({
  answer: await ctx.interrupt({ question: "go?" }),
}));

let runner: Runner;
let server: DurableServer;
before(async () => {
  runner = createRunner({ store: createMemoryStore(), graphs: [held, asks] });
  server = await serveDurable({
    runner,
    maxDrivingRuns: 2,
    authenticate: (request) => request.headers.get("x-tenant") ?? undefined,
  });
});
after(async () => {
  for (const open of gates.values()) open();
  await server.close();
  await runner.close();
});

const start = (tenant: string, graph: string, threadId: string, input: object) =>
  fetch(`${server.url}/runs`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-tenant": tenant },
    body: JSON.stringify({ graph, threadId, input }),
  });

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let attempt = 0; attempt < 250; attempt += 1) {
    if (await check()) return;
    await sleep(20);
  }
  assert.fail(`timed out waiting for ${what}`);
}

it("drives two runs of a tenant at once, refuses the third, frees a place when one ends", async () => {
  assert.equal((await start("a", "held", "a1", { key: "a1" })).status, 201);
  assert.equal((await start("a", "held", "a2", { key: "a2" })).status, 201);
  const refused = await start("a", "held", "a3", { key: "a3" });
  assert.equal(refused.status, 429);
  const { error } = (await refused.json()) as { error: { code: string; retryable: boolean } };
  assert.deepEqual([error.code, error.retryable], ["too_many_runs", true]);
  assert.equal(await runner.get("a/a3"), undefined, "a refused start stores nothing");
  assert.equal((await start("b", "held", "b1", { key: "b1" })).status, 201, "another tenant is untouched");

  await until(() => gates.has("a1"), "the first run waiting");
  gates.get("a1")?.();
  await until(async () => (await runner.get("a/a1"))?.status === "completed", "the first run ending");
  await until(async () => (await start("a", "held", "a3", { key: "a3" })).status === 201, "a place freed");
});

it("a paused run holds no place", async () => {
  for (const threadId of ["c1", "c2", "c3"]) {
    assert.equal((await start("c", "asks", threadId, {})).status, 201, threadId);
    await until(async () => (await runner.get(`c/${threadId}`))?.status === "paused", `${threadId} pausing`);
  }
});

it("a fork counts while it drives its new thread: refused at the bound, let through below it", async () => {
  assert.equal((await start("d", "held", "d1", { key: "d1" })).status, 201);
  assert.equal((await start("d", "held", "d2", { key: "d2" })).status, 201);
  const fork = () =>
    fetch(`${server.url}/runs/d1/fork`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-tenant": "d" },
      body: JSON.stringify({ seq: 999_999, threadId: "d3" }),
    });
  const refused = await fork();
  assert.equal(refused.status, 429);
  assert.equal(((await refused.json()) as { error: { code: string } }).error.code, "too_many_runs");
  await until(() => gates.has("d1"), "the run waiting");
  gates.get("d1")?.();
  await until(async () => (await runner.get("d/d1"))?.status === "completed", "a run ending");
  // Below the bound the fork reaches the runner, which judges the checkpoint (none at that seq).
  await until(async () => (await fork()).status === 400, "the fork let through");
});
