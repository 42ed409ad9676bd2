/**
 * A tenant's runs paused at approvals, as a flood (ADR 0123), over real HTTP on a SQLite file and on
 * PostgreSQL: past `maxOpenRuns` a start or fork is refused 409 `too_many_open_runs` with nothing
 * stored, a place comes back when a run is answered, cancelled or expires, another tenant goes on, and
 * the runner keeps one expiry timer however many runs wait on one.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { approve, createGraph, createRunner, type DurableStore, type Runner } from "@tackle/durable";
import {
  createDurableClient,
  type DurableClient,
  type DurableServer,
  serveDurable,
} from "@tackle/durable/http";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import { tempSqliteStore } from "./helpers.ts";

type Gate = { expiresInMs?: number; answer?: unknown };
/** A run that pauses at once at an approval, the cheapest open run a tenant can make. */
const gate = createGraph<Gate>("gate").node("ask", async (state, ctx) => {
  const answer = await approve(ctx, {
    title: "Go on?",
    params: {},
    ...(state.expiresInMs === undefined ? {} : { expiresInMs: state.expiresInMs }),
  });
  return { answer };
});

const tokens: Record<string, string> = { "token-a": "acme", "token-b": "globex" };
const authenticate = (request: Request) =>
  tokens[(request.headers.get("authorization") ?? "").replace(/^Bearer /, "")];
const maxOpenRuns = 12;
const hour = 60 * 60 * 1000;

/**
 * Timers of an hour or more that are armed now: only approval expiries are that long here. The runner
 * calls the global `setTimeout`, so wrapping it sees every timer it arms.
 */
function watchLongTimers() {
  const armed = new Set<unknown>();
  const realSet = globalThis.setTimeout;
  const realClear = globalThis.clearTimeout;
  globalThis.setTimeout = ((callback: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const timer = realSet(
      (...inner: unknown[]) => {
        armed.delete(timer);
        callback(...inner);
      },
      ms,
      ...args,
    );
    if ((ms ?? 0) >= hour / 2) armed.add(timer);
    return timer;
  }) as typeof setTimeout;
  globalThis.clearTimeout = ((timer: Parameters<typeof clearTimeout>[0]) => {
    armed.delete(timer);
    realClear(timer);
  }) as typeof clearTimeout;
  return {
    count: () => armed.size,
    restore() {
      globalThis.setTimeout = realSet;
      globalThis.clearTimeout = realClear;
    },
  };
}

interface Fixture {
  readonly runner: Runner;
  readonly server: DurableServer;
  readonly acme: DurableClient;
  readonly globex: DurableClient;
  close(): Promise<void>;
}

async function serve(store: DurableStore, cleanup: () => Promise<void>): Promise<Fixture> {
  const runner = createRunner({ store, graphs: [gate], pollIntervalMs: 20 });
  const server = await serveDurable({ runner, authenticate, maxOpenRuns });
  const client = (token: string) =>
    createDurableClient({ baseUrl: server.url, headers: { authorization: `Bearer ${token}` } });
  return {
    runner,
    server,
    acme: client("token-a"),
    globex: client("token-b"),
    async close() {
      await server.close();
      await runner.close();
      await cleanup();
    },
  };
}

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Starts a run over HTTP and waits for it to pause at its approval. */
async function startPaused(client: DurableClient, threadId: string, input: Gate = { expiresInMs: 2 * hour }) {
  await client.start("gate", input, { threadId, runId: `run-${threadId}` });
  await until(async () => (await client.get(threadId)).status === "paused", `${threadId} to pause`);
}

/** A raw start, for its status and error body. */
async function rawStart(server: DurableServer, token: string, threadId: string) {
  const response = await fetch(`${server.url}/runs`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({
      graph: "gate",
      input: { expiresInMs: 2 * hour },
      threadId,
      runId: `run-${threadId}`,
    }),
  });
  return {
    status: response.status,
    body: (await response.json()) as {
      error?: { code: string; retryable: boolean; message: string; data: { max: number } };
    },
  };
}

async function acmeThreads(runner: Runner): Promise<number> {
  return (await runner.threads({ prefix: "acme/", limit: 1000 })).length;
}

function bounds(fixture: () => Fixture, engine: string) {
  test(`${engine}: past maxOpenRuns paused runs a start is refused 409, nothing stored, places come back`, async () => {
    const { acme, globex, runner, server } = fixture();
    const timers = watchLongTimers();
    try {
      for (let i = 0; i < maxOpenRuns; i++) await startPaused(acme, `p${i}`);
      // However many runs wait on an expiry, the runner arms one timer for the soonest.
      assert.equal(timers.count(), 1, "one expiry timer for all the paused runs");
    } finally {
      timers.restore();
    }
    const refused = await rawStart(server, "token-a", "one-too-many");
    assert.equal(refused.status, 409);
    assert.equal(refused.body.error?.code, "too_many_open_runs");
    assert.equal(refused.body.error?.retryable, false);
    assert.equal(refused.body.error?.data.max, maxOpenRuns);
    assert.match(refused.body.error?.message ?? "", /maxOpenRuns/);
    assert.equal(await runner.get("acme/one-too-many"), undefined, "no run stored");
    assert.deepEqual(await runner.frames("acme/one-too-many"), [], "no frame stored");
    assert.equal(await acmeThreads(runner), maxOpenRuns);
    // A fork is a start too.
    const [checkpoint] = await acme.history("p0");
    await assert.rejects(acme.fork("p0", { seq: checkpoint?.seq ?? 1, threadId: "forked" }), {
      code: "too_many_open_runs",
    });
    assert.equal(await runner.get("acme/forked"), undefined);
    // The same start sent again still answers the run it started; another tenant goes on.
    assert.deepEqual(await acme.start("gate", {}, { threadId: "p3", runId: "run-p3" }), {
      threadId: "p3",
      runId: "run-p3",
    });
    await startPaused(globex, "g0");
    // Nothing already stored is lost: every paused run is still there, still answerable.
    for (let i = 0; i < maxOpenRuns; i++) assert.equal((await acme.get(`p${i}`)).status, "paused");

    // Answered: the run completes and its place comes back.
    const paused = await acme.get("p0");
    await acme.resume("p0", { [paused.interrupts[0]?.id ?? ""]: { approved: true } });
    await until(async () => (await acme.get("p0")).status === "completed", "p0 to complete");
    await startPaused(acme, "after-answer");
    assert.equal((await rawStart(server, "token-a", "still-full")).status, 409);
    // Cancelled: the same.
    await fetch(`${server.url}/runs/p1/cancel`, {
      method: "POST",
      headers: { authorization: "Bearer token-a", "content-type": "application/json" },
      body: "{}",
    });
    await startPaused(acme, "after-cancel");
    assert.equal((await rawStart(server, "token-a", "still-full-2")).status, 409);
    // Declined, then a run whose approval expires: the runner resumes it at its expiry, it ends, and its
    // place comes back.
    await acme.resume("p2", { [(await acme.get("p2")).interrupts[0]?.id ?? ""]: { approved: false } });
    await until(async () => (await acme.get("p2")).status === "completed", "p2 to complete");
    await startPaused(acme, "short", { expiresInMs: 150 });
    assert.equal((await rawStart(server, "token-a", "still-full-3")).status, 409);
    await until(async () => (await acme.get("short")).status === "completed", "the expiry to end the run");
    const { answer } = (await acme.get<Gate>("short")).state as { answer: Record<string, unknown> };
    assert.equal(answer.expired, true);
    assert.equal(answer.approved, false);
    await startPaused(acme, "after-expiry");
    assert.equal((await rawStart(server, "token-a", "still-full-4")).status, 409);
  });
}

describe("open-runs bound on a SQLite file", () => {
  let fixture: Fixture;
  before(async () => {
    const temp = tempSqliteStore();
    fixture = await serve(temp.store, () => temp.cleanup());
  });
  after(() => fixture.close());
  bounds(() => fixture, "SQLite");
});

describe("open-runs bound on PostgreSQL", () => {
  let fixture: Fixture;
  let database: TestDatabase;
  before(async () => {
    database = await createTestDatabase("durable_open_runs");
    const store = await createPostgresStore({ connectionString: database.url });
    fixture = await serve(store, async () => {
      await store.close();
      await database.drop();
    });
  });
  after(() => fixture.close());
  bounds(() => fixture, "PostgreSQL");
});
