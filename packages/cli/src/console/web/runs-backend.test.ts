import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { silentLogger } from "@tackle/core";
import { approve, createGraph, createMemoryStore, createRunner, type Runner } from "@tackle/durable";
import { type DurableServer, serveDurable } from "@tackle/durable/http";
import { freePort } from "@tackle/test-support";
import { Hono } from "hono";
import { durableUrlProblem } from "../durable-url.ts";
import { remoteRuns } from "./runs-backend.ts";

const logger = silentLogger;
const graph = createGraph<{ item: string; outcome?: string }>("approval-shape").node(
  "ask",
  async (state, ctx) => {
    const answer = await approve<{ approved: boolean }>(ctx, {
      title: "Ship it?",
      toolName: "ship",
      params: { item: state.item },
      inputSchema: { type: "object", properties: { item: { type: "string" } } },
    });
    return { outcome: answer.approved ? "shipped" : "held" };
  },
);

let runner: Runner;
let server: DurableServer;

before(async () => {
  runner = createRunner({ store: createMemoryStore(), graphs: [graph], logger });
  server = await serveDurable({ runner });
  await runner.start(graph, { item: "mug" }, { threadId: "rb-1" });
});

after(async () => {
  await server?.close();
  await runner?.close();
});

describe("another durable server's runs, for the runs page", () => {
  test("its threads are listed with their state and pending approval", async () => {
    const rows = await remoteRuns(server.url, logger).list();
    assert.equal(rows.length, 1);
    const [row] = rows;
    assert.equal(row?.threadId, "rb-1");
    assert.equal(row?.graph, "approval-shape");
    assert.equal(row?.status, "paused");
    assert.equal(row?.state.item, "mug");
    assert.equal(row?.interrupts.length, 1);
  });

  test("its API is passed through under /api/durable: a read, then a resume that completes the run", async () => {
    const app = new Hono();
    remoteRuns(`${server.url}/`, logger).mount(app);
    const read = await app.request("/api/durable/runs/rb-1", {
      headers: { cookie: "tackle_console=secret" },
    });
    assert.equal(read.status, 200);
    const run = (await read.json()) as { interrupts: { id: string }[] };
    const id = run.interrupts[0]?.id ?? "";
    const resumed = await app.request("/api/durable/runs/rb-1/resume", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ answers: { [id]: { approved: true } } }),
    });
    assert.equal(resumed.status, 202, await resumed.clone().text());
    const deadline = Date.now() + 10_000;
    while ((await runner.get("rb-1"))?.status !== "completed") {
      assert.ok(Date.now() < deadline, "the resumed run completes");
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const shipped = await runner.get("rb-1");
    assert.equal((shipped?.state as { outcome?: string } | undefined)?.outcome, "shipped");
    // The server's own errors pass through as they are.
    const unknown = await app.request("/api/durable/runs/nobody");
    assert.equal(unknown.status, 404);
    assert.equal(((await unknown.json()) as { error: { code: string } }).error.code, "not_found");
  });

  test("a server that does not answer is a 502 naming it", async () => {
    const app = new Hono();
    const url = `http://127.0.0.1:${await freePort()}`;
    remoteRuns(url, logger).mount(app);
    const answer = await app.request("/api/durable/runs/rb-1");
    assert.equal(answer.status, 502);
    const body = (await answer.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, "durable_unreachable");
    assert.match(body.error.message, new RegExp(url));
  });

  test("--durable-url is an http URL on loopback", () => {
    assert.equal(durableUrlProblem("http://127.0.0.1:4290"), undefined);
    assert.equal(durableUrlProblem("http://[::1]:4290/"), undefined);
    assert.equal(durableUrlProblem("http://localhost:4290"), undefined);
    assert.match(durableUrlProblem("http://192.168.1.5:4290") ?? "", /loopback only/);
    assert.match(durableUrlProblem("https://127.0.0.1:4290") ?? "", /http:\/\//);
    assert.match(durableUrlProblem("127.0.0.1:4290") ?? "", /not a URL|http:\/\//);
  });
});
