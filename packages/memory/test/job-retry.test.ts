/**
 * A job that meets a transient database error mid-job is retried, not failed, and finishes with every
 * turn stored once: on PostgreSQL its sessions cut (what a restart or failover does to every session),
 * on SQLite the file held by another writer past the busy timeout.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { silentLogger } from "@tackle/core";
import { createSqliteStore, MemoryClient } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { type MemoryServer, serveMemory } from "@tackle/memory/server";
import { createTestDatabase, type TestDatabase, testTimeoutMs, underLoadMs } from "@tackle/test-support";
import pg from "pg";
import { startBigImport, until } from "./support/big-import.ts";

const applicationName = "memory-job-retry-victim";
const conversations = 2;
const perConversation = 2000;
const turns = conversations * perConversation;

const startImport = (client: MemoryClient) => startBigImport(client, conversations, perConversation);

let database: TestDatabase;
let sql: pg.Client;
let server: MemoryServer | undefined;
const directory = mkdtempSync(join(tmpdir(), "tackle-memory-retry-"));
before(async () => {
  database = await createTestDatabase("tackle_memory_retry");
  sql = new pg.Client({ connectionString: database.url });
  await sql.connect();
});
after(async () => {
  await server?.close();
  await sql?.end().catch(() => undefined);
  await database?.drop();
  rmSync(directory, { recursive: true, force: true });
});

it("an import whose connections the server terminates mid-job is retried and stores every turn once", {
  timeout: testTimeoutMs(120_000),
}, async () => {
  const url = new URL(database.url);
  url.searchParams.set("application_name", applicationName);
  const store = await createPostgresStore({ connectionString: url.toString() });
  server = await serveMemory({ store, apiKeys: { "key-a": "tenant-a" }, port: 0, logger: silentLogger });
  const client = new MemoryClient({ baseUrl: server.url, apiKey: "key-a", allowPrivateNetwork: true });
  const job = await startImport(client);
  const events = async () =>
    (await sql.query("SELECT count(*)::int AS n FROM memory_events")).rows[0].n as number;
  await until(
    "the job running with progress",
    async () => {
      const row = (await sql.query("SELECT status FROM memory_jobs WHERE id = $1", [job.id])).rows[0];
      return row?.status === "running" && (await events()) >= 40 ? true : undefined;
    },
    underLoadMs(60_000),
  );

  // Cut the service's sessions that are inside a statement or a transaction (the job's work), twice,
  // as a restart cuts every session: an idle pooled session cut is only replaced by the pool.
  let sessionsCut = 0;
  for (let polls = 0; sessionsCut < 2 && polls < 2_000; polls++) {
    const running = (await sql.query("SELECT status FROM memory_jobs WHERE id = $1", [job.id])).rows[0];
    if (running?.status !== "running") break;
    const cut = await sql.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
       WHERE application_name = $1 AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')`,
      [applicationName],
    );
    sessionsCut += cut.rowCount ?? 0;
    if ((cut.rowCount ?? 0) > 0) await sleep(300);
  }
  assert.ok(sessionsCut > 0, "the job's sessions were terminated");
  const partial = await events();
  assert.ok(partial < turns, `the job finished before the cut (${partial} events)`);

  await assertFinishedOnce(
    client,
    job.id,
    async (text, parameters = []) => (await sql.query(text, parameters)).rows,
  );
});

type Query = (text: string, parameters?: unknown[]) => Promise<Record<string, unknown>[]>;

/**
 * The job ends succeeded, every turn stored once and kept once as an episode, no memory twice. A job
 * left `running` that stores nothing more for a while fails the test then, not at its deadline.
 */
async function assertFinishedOnce(client: MemoryClient, jobId: string, query: Query): Promise<void> {
  const stalledMs = underLoadMs(20_000);
  let stored = -1;
  let storedAt = Date.now();
  const done = await until(
    "the job finished",
    async () => {
      const [row] = await query("SELECT status, error FROM memory_jobs WHERE id = $1", [jobId]);
      if (row?.status === "succeeded" || row?.status === "failed") return row;
      const [events] = await query("SELECT count(*) AS n FROM memory_events");
      if (Number(events?.n) !== stored) [stored, storedAt] = [Number(events?.n), Date.now()];
      if (Date.now() - storedAt > stalledMs)
        assert.fail(`the job is ${row?.status} with ${stored} of ${turns} turns stored for ${stalledMs} ms`);
      return undefined;
    },
    underLoadMs(90_000),
  );
  assert.equal(done.status, "succeeded", String(done.error));
  assert.equal((await client.getJob(jobId)).job.status, "succeeded");
  const [events] = await query("SELECT count(*) AS n FROM memory_events");
  assert.equal(Number(events?.n), turns);
  const duplicated = await query(
    "SELECT content, kind, count(*) AS n FROM memory_memories WHERE status = 'active' GROUP BY tenant_id, kind, content HAVING count(*) > 1",
  );
  assert.deepEqual(duplicated, []);
  const [episodes] = await query("SELECT count(*) AS n FROM memory_memories WHERE kind = 'episode'");
  assert.equal(Number(episodes?.n), turns, "one episode per turn");
}

it("an import that finds the SQLite file held past the busy timeout is retried and stores every turn once", {
  timeout: testTimeoutMs(120_000),
}, async () => {
  const path = join(directory, "memory.db");
  const store = createSqliteStore({ path });
  const local = await serveMemory({ store, apiKeys: { "key-a": "tenant-a" }, port: 0, logger: silentLogger });
  const reader = new DatabaseSync(path);
  const query: Query = async (text, parameters = []) =>
    reader.prepare(text.replaceAll("$1", "?")).all(...(parameters as string[])) as Record<string, unknown>[];
  try {
    const client = new MemoryClient({ baseUrl: local.url, apiKey: "key-a", allowPrivateNetwork: true });
    const job = await startImport(client);
    await until(
      "the job running with progress",
      async () => {
        const [row] = await query("SELECT status FROM memory_jobs WHERE id = $1", [job.id]);
        const [events] = await query("SELECT count(*) AS n FROM memory_events");
        return row?.status === "running" && Number(events?.n) >= 40 ? true : undefined;
      },
      underLoadMs(60_000),
    );
    // Another writer holds the file 7 s, past the store's 5 s busy timeout: the job's next write fails
    // SQLITE_BUSY (after waiting the timeout, which holds this process's loop too).
    const holder = new DatabaseSync(path);
    holder.exec("BEGIN IMMEDIATE");
    const [held] = await query("SELECT count(*) AS n FROM memory_events");
    assert.ok(
      Number(held?.n) < turns,
      `the job finished before the file was held (${String(held?.n)} events)`,
    );
    await sleep(7_000);
    holder.exec("COMMIT");
    holder.close();
    await assertFinishedOnce(client, job.id, query);
  } finally {
    reader.close();
    await local.close();
  }
});
