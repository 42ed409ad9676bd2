/**
 * Two memory service processes on one PostgreSQL database: a job is claimed by one process with a
 * lease by the database's clock; SIGKILL it mid-job and the other process finishes the job after the
 * lease, with every event stored once and no memory duplicated.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { after, before, it } from "node:test";
import { fileURLToPath } from "node:url";
import { MemoryClient } from "@tackle/memory";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import pg from "pg";
import { startBigImport, until } from "./support/big-import.ts";

const child = fileURLToPath(new URL("./support/service-child.ts", import.meta.url));
const children: ChildProcess[] = [];
let database: TestDatabase;
let sql: pg.Client;
before(async () => {
  database = await createTestDatabase("tackle_memory_leases");
});
after(async () => {
  for (const process_ of children)
    if (process_.exitCode === null && process_.signalCode === null) process_.kill("SIGKILL");
  await sql?.end().catch(() => undefined);
  await database?.drop();
});

const leaseMs = 1500;

async function startService(): Promise<{ process: ChildProcess; url: string }> {
  const process_ = spawn(
    process.execPath,
    ["--conditions=@tackle/source", child, database.url, String(leaseMs)],
    {
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  children.push(process_);
  let stderr = "";
  process_.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const lines = createInterface({ input: process_.stdout as NodeJS.ReadableStream });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`service not ready in 60 s: ${stderr}`)), 60_000);
    lines.on("line", (line) => {
      const match = /^ready (\S+)$/.exec(line);
      if (match) {
        clearTimeout(timer);
        resolve(match[1] as string);
      }
    });
    process_.once("exit", (code) => reject(new Error(`service exited (${code}): ${stderr}`)));
  });
  return { process: process_, url };
}

it("a job whose process is SIGKILLed mid-job is finished once by the other process", {
  timeout: 170_000,
}, async () => {
  const first = await startService();
  // The second process starts while the first claims the job (its start takes seconds, the claim
  // follows the import's commit at once), and the kill follows the first progress at once: an import
  // writes a hundred turns in a few statements (ADR 0370), so the job must be thousands of turns long.
  const starting = startService();
  starting.catch(() => undefined); // awaited after the kill; a failed start surfaces there
  sql = new pg.Client({ connectionString: database.url });
  await sql.connect();
  const client = new MemoryClient({ baseUrl: first.url, apiKey: "key-a", allowPrivateNetwork: true });
  const conversations = 4;
  const perConversation = 2000;
  const turns = conversations * perConversation;
  const job = await startBigImport(client, conversations, perConversation);

  // The first process holds the job and has stored part of it.
  const holder = await until(
    "the job running with progress",
    async () => {
      const row = (await sql.query("SELECT status, lease_owner FROM memory_jobs WHERE id = $1", [job.id]))
        .rows[0];
      const events = (await sql.query("SELECT count(*)::int AS n FROM memory_events")).rows[0].n as number;
      return row?.status === "running" && events >= 40 ? (row.lease_owner as string) : undefined;
    },
    60_000,
  );
  first.process.kill("SIGKILL");
  const killedAt = Date.now();
  const partial = (await sql.query("SELECT count(*)::int AS n FROM memory_events")).rows[0].n as number;
  assert.ok(partial < turns, `the job finished before the kill (${partial} events)`);
  const second = await starting;

  // The second process takes it over once the lease lapses (by the database's clock) and finishes it.
  const done = await until(
    "the job finished",
    async () => {
      const row = (
        await sql.query("SELECT status, lease_owner, result FROM memory_jobs WHERE id = $1", [job.id])
      ).rows[0];
      return row?.status === "succeeded" || row?.status === "failed" ? row : undefined;
    },
    150_000,
  );
  assert.equal(done.status, "succeeded");
  assert.notEqual(done.lease_owner, holder, "finished by the other process");
  assert.ok(Date.now() - killedAt >= 0);

  // Every turn stored once, kept once as an episode; no memory twice.
  assert.equal((await sql.query("SELECT count(*)::int AS n FROM memory_events")).rows[0].n, turns);
  const duplicated = await sql.query(
    "SELECT content, kind, count(*)::int AS n FROM memory_memories WHERE status = 'active' GROUP BY tenant_id, kind, content HAVING count(*) > 1",
  );
  assert.deepEqual(duplicated.rows, []);
  const episodes = await sql.query("SELECT count(*)::int AS n FROM memory_memories WHERE kind = 'episode'");
  assert.equal(episodes.rows[0].n, turns, "one episode per turn");
  const memories = (await sql.query("SELECT count(*)::int AS n FROM memory_memories")).rows[0].n as number;
  assert.ok(memories > 0);

  // A client given both services fails over from the dead one to the survivor.
  const both = new MemoryClient({
    baseUrl: [first.url, second.url],
    apiKey: "key-a",
    allowPrivateNetwork: true,
    timeoutMs: 2000,
  });
  assert.equal((await both.getJob(job.id)).job.status, "succeeded");
  assert.equal(both.baseUrl, second.url, "later calls go straight to the survivor");
  const added = await both.add({ userId: "u", content: "Added after the failover" });
  assert.equal(added.memory.content, "Added after the failover");
});
