/** PostgreSQL-only behaviour: pooled connections the server terminates are replaced, never a crash. */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createGraph, createRunner, type DurableStore } from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import pg from "pg";

let database: TestDatabase;
let store: DurableStore;
const lost: Error[] = [];

before(async () => {
  database = await createTestDatabase("durable_pg");
  store = await createPostgresStore({ connectionString: database.url, onError: (error) => lost.push(error) });
});
after(async () => {
  await store.close();
  await database.drop();
});

test("connections terminated by the server are reported and replaced; runs go on", async () => {
  const graph = createGraph<{ n: number }>("terminated").node("a", async (state, ctx) => ({
    n: await ctx.step("inc", () => state.n + 1),
  }));
  const runner = createRunner({ store });
  assert.equal((await runner.start(graph, { n: 0 })).state.n, 1);
  const admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  try {
    await admin.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
      [database.name],
    );
  } finally {
    await admin.end();
  }
  await sleep(100);
  assert.ok(lost.length >= 1, "the idle connection's loss was reported");
  assert.equal((await runner.start(graph, { n: 41 })).state.n, 42);
});

test("one database round trip per journaled step: a step's outcome and a node's transition ride with the next commit", async () => {
  const pool = new pg.Pool({ connectionString: database.url, max: 2 });
  let queries = 0;
  const counted = await createPostgresStore({ pool, tablePrefix: "counted_" });
  const query = pool.query.bind(pool);
  // Every statement the store sends through the pool (its commits are single statements).
  (pool as unknown as { query: unknown }).query = (...args: Parameters<typeof query>) => {
    queries++;
    return query(...args);
  };
  try {
    const nodes = 20;
    const graph = createGraph<{ n: number }>("counted");
    for (let index = 0; index < nodes; index++) {
      graph.node(`n${index}`, async (state, ctx) => ({ n: await ctx.step("inc", () => state.n + 1) }));
      if (index > 0) graph.edge(`n${index - 1}`, `n${index}`);
    }
    const steps = createGraph<{ n: number }>("counted-steps").node("loop", async (state, ctx) => {
      let n = state.n;
      for (let index = 0; index < nodes; index++) n = await ctx.step("inc", () => n + 1);
      return { n };
    });
    // The driver's statements only: the expiry loader's look at start is a read of its own (ADR 0124).
    const runner = createRunner({ store: counted, expiries: false });
    queries = 0;
    const done = await runner.start(graph, { n: 0 });
    assert.equal(done.state.n, nodes);
    // Before: a started marker, an outcome and a transition per node (3 × nodes).
    assert.ok(
      queries >= nodes && queries <= nodes + 2,
      `${queries} statements for ${nodes} nodes of one step`,
    );
    queries = 0;
    assert.equal((await runner.start(steps, { n: 0 })).state.n, nodes);
    assert.ok(
      queries >= nodes && queries <= nodes + 2,
      `${queries} statements for ${nodes} steps in one node`,
    );
  } finally {
    await counted.close();
    await pool.end();
  }
});
