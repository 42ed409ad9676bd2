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
