/**
 * A tenant's legal calls as a flood (ADR 0122), over real HTTP on a SQLite file and on PostgreSQL: a
 * thread's state grown by start after start is refused past `maxStateBytes` with nothing stored, and a
 * history of large states is answered a page at a time, each page within `maxHistoryBytes`, while
 * another tenant is served.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createGraph, createRunner, type DurableStore, type Runner } from "@tackle/durable";
import {
  createDurableClient,
  type DurableClient,
  type DurableServer,
  serveDurable,
} from "@tackle/durable/http";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import { tempSqliteStore } from "./helpers.ts";

type Chat = Record<string, unknown>;
/** One node per run: the caller's turn goes in as input, the node counts the turns. */
const chat = createGraph<Chat>("chat").node("reply", (state) => ({ turns: Number(state.turns ?? 0) + 1 }));

const tokens: Record<string, string> = { "token-a": "acme", "token-b": "globex" };
const authenticate = (request: Request) =>
  tokens[(request.headers.get("authorization") ?? "").replace(/^Bearer /, "")];

const maxStateBytes = 1024 * 1024;
const maxHistoryBytes = 512 * 1024;
const kib = (n: number) => "x".repeat(n * 1024);

interface Fixture {
  readonly runner: Runner;
  readonly server: DurableServer;
  readonly acme: DurableClient;
  readonly globex: DurableClient;
  close(): Promise<void>;
}

async function serve(store: DurableStore, cleanup: () => Promise<void>): Promise<Fixture> {
  const runner = createRunner({ store, graphs: [chat], pollIntervalMs: 20, maxStateBytes });
  const server = await serveDurable({ runner, authenticate, maxHistoryBytes });
  const client = (token: string) =>
    createDurableClient({ baseUrl: server.url, headers: { authorization: `Bearer ${token}` } });
  return {
    runner,
    server,
    acme: client("token-a"),
    globex: client("token-b"),
    async close() {
      await server.close();
      await runner.idle();
      await cleanup();
    },
  };
}

/** A turn on the thread, waited out (the runs are one quick node). */
async function turn(client: DurableClient, threadId: string, input: Chat, runId: string) {
  await client.start("chat", input, { threadId, runId });
  while ((await client.get(threadId)).status === "running") await new Promise((r) => setTimeout(r, 5));
}

function bounds(fixture: () => Fixture, engine: string) {
  test(`${engine}: a start that would grow the thread's state past maxStateBytes is refused 413, nothing stored`, async () => {
    const { acme, globex, runner, server } = fixture();
    // Each input is legal (under the 1 MiB body limit); merged over the carried state they add up.
    await turn(acme, "grow", { a: kib(400) }, "r1");
    await turn(acme, "grow", { b: kib(400) }, "r2");
    const frames = (await runner.frames("acme/grow")).length;
    const response = await fetch(`${server.url}/runs`, {
      method: "POST",
      headers: { authorization: "Bearer token-a", "content-type": "application/json" },
      body: JSON.stringify({ graph: "chat", input: { c: kib(400) }, threadId: "grow", runId: "r3" }),
    });
    assert.equal(response.status, 413);
    const { error } = (await response.json()) as {
      error: { code: string; retryable: boolean; message: string; data: { bytes: number; maxBytes: number } };
    };
    assert.equal(error.code, "state_too_large");
    assert.equal(error.retryable, false, "sending it again cannot help");
    assert.equal(error.data.maxBytes, maxStateBytes);
    assert.ok(error.data.bytes > maxStateBytes, error.message);
    assert.match(error.message, /maxStateBytes/);
    // Nothing stored: no third run, no frame, the state as the second run left it.
    assert.deepEqual(
      (await runner.runs("acme/grow")).map((run) => run.runId),
      ["r1", "r2"],
    );
    assert.equal((await runner.frames("acme/grow")).length, frames);
    const run = await acme.get<Chat>("grow");
    assert.equal(run.runId, "r2");
    assert.deepEqual(Object.keys(run.state).sort(), ["a", "b", "turns"]);
    // A turn that replaces a key rather than adding one still goes on; so does the other tenant.
    await turn(acme, "grow", { b: "short" }, "r3");
    assert.equal((await acme.get<Chat>("grow")).state.turns, 3);
    await turn(globex, "grow", { a: kib(400) }, "g1");
    // A fork that would start past it is refused too, and no thread is made.
    const [start] = await acme.history("grow", { runId: "r2" });
    assert.ok(start !== undefined);
    await assert.rejects(acme.fork("grow", { seq: start.seq, threadId: "fork", input: { c: kib(400) } }), {
      code: "state_too_large",
    });
    await assert.rejects(acme.get("fork"), { code: "not_found" });
  });

  test(`${engine}: a history of large states is answered in pages within maxHistoryBytes that add up to it`, async () => {
    const { acme, globex, runner, server } = fixture();
    // Every checkpoint carries the whole state: 8 turns of a 200 KiB state are 16 checkpoints, 3.2 MiB.
    await turn(acme, "long", { blob: kib(200) }, "t0");
    for (let i = 1; i < 8; i++) await turn(acme, "long", {}, `t${i}`);
    const whole = await runner.history("acme/long");
    assert.equal(whole.length, 16);
    const pages: { checkpoints: { seq: number }[]; nextAfterSeq?: number }[] = [];
    let afterSeq: number | undefined = 0;
    const served: number[] = [];
    while (afterSeq !== undefined) {
      const [response]: [Response, unknown] = await Promise.all([
        fetch(`${server.url}/runs/long/history?afterSeq=${afterSeq}`, {
          headers: { authorization: "Bearer token-a" },
        }),
        globex.get("grow").then(() => served.push(1)),
      ]);
      assert.equal(response.status, 200);
      const text = await response.text();
      // What a client and the host hold per request: one page, not the thread's every state.
      assert.ok(Buffer.byteLength(text) <= maxHistoryBytes + 1024, `a page of ${text.length} bytes`);
      const page = JSON.parse(text) as (typeof pages)[number];
      assert.ok(page.checkpoints.length >= 1);
      pages.push(page);
      afterSeq = page.nextAfterSeq;
    }
    assert.ok(pages.length >= 6, `${pages.length} pages`);
    assert.equal(served.length, pages.length, "the other tenant was answered beside every page");
    const paged = pages.flatMap((page) => page.checkpoints);
    assert.deepEqual(paged, JSON.parse(JSON.stringify(whole)));
    // The client reads the pages for its caller; `limit` pages by count too.
    assert.deepEqual(await acme.history("long"), paged);
    const two = await fetch(`${server.url}/runs/long/history?limit=1&afterSeq=${whole[3]?.seq}`, {
      headers: { authorization: "Bearer token-a" },
    });
    assert.deepEqual(await two.json(), {
      checkpoints: [JSON.parse(JSON.stringify(whole[4]))],
      nextAfterSeq: whole[4]?.seq,
    });
    const bad = await fetch(`${server.url}/runs/long/history?limit=0`, {
      headers: { authorization: "Bearer token-a" },
    });
    assert.equal(bad.status, 400);
  });
}

describe("state and history bounds on a SQLite file", () => {
  let fixture: Fixture;
  before(async () => {
    const temp = tempSqliteStore();
    fixture = await serve(temp.store, () => temp.cleanup());
  });
  after(() => fixture.close());
  bounds(() => fixture, "SQLite");
});

describe("state and history bounds on PostgreSQL", () => {
  let fixture: Fixture;
  let database: TestDatabase;
  before(async () => {
    database = await createTestDatabase("durable_bounds");
    const store = await createPostgresStore({ connectionString: database.url });
    fixture = await serve(store, async () => {
      await store.close();
      await database.drop();
    });
  });
  after(() => fixture.close());
  bounds(() => fixture, "PostgreSQL");
});
