/**
 * A job whose claim committed on PostgreSQL but whose answer the process never got (the connection
 * reset as the answer came back) is the process's own: it claims it again at its next poll and
 * finishes it, rather than leaving it `running` under a lease no one renews until the lease runs out
 * (ADR 0570). Found by postgres-faults.property.test.ts: imports finished ~15 s (the default lease)
 * after the database came back.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { MemoryClient } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { type MemoryServer, serveMemory } from "@tackle/memory/server";
import {
  createTestDatabase,
  startTcpRelay,
  type TcpRelay,
  type TestDatabase,
  underLoadMs,
} from "@tackle/test-support";
import pg from "pg";

/** Far longer than the wait below: a job left to its lease would not finish within it. */
const leaseMs = 120_000;

let database: TestDatabase;
let relay: TcpRelay;
let server: MemoryServer;
let direct: pg.Client;
before(async () => {
  database = await createTestDatabase("tackle_memory_claim_lost");
  relay = await startTcpRelay(database.url);
  const store = await createPostgresStore({ connectionString: relay.url, jobLeaseMs: leaseMs });
  server = await serveMemory({
    store,
    apiKeys: { "key-a": "tenant-a" },
    port: 0,
    logger: { debug() {}, info() {}, warn() {}, error() {} },
  });
  direct = new pg.Client({ connectionString: database.url });
  await direct.connect();
});
after(async () => {
  await server?.close();
  await relay?.close();
  await direct?.end();
  await database?.drop();
});

it("finishes an import whose claim's answer was lost at the next poll, not after the lease", async () => {
  const client = new MemoryClient({ baseUrl: server.url, apiKey: "key-a", allowPrivateNetwork: true });
  // The claim that follows the import's commit loses its answer: armed once the job's row is sent.
  let jobSent = false;
  relay.loseAnswerTo((text) => {
    if (text.includes("INSERT INTO memory_jobs")) jobSent = true;
    return jobSent && text.includes("SKIP LOCKED");
  });
  const { job } = await client.importConversations({
    format: "openai",
    userId: "u",
    infer: false,
    conversations: [
      {
        sessionId: "s",
        messages: [
          { role: "user", content: "I keep bees" },
          { role: "assistant", content: "Noted, bees" },
        ],
      },
    ],
  });
  const waitMs = Math.min(underLoadMs(10_000), leaseMs / 2);
  const deadline = Date.now() + waitMs;
  for (;;) {
    const row = (await direct.query("SELECT status, lease_owner FROM memory_jobs WHERE id = $1", [job.id]))
      .rows[0] as { status: string; lease_owner: string | null };
    if (row.status === "succeeded") break;
    assert.ok(
      Date.now() < deadline,
      `import still ${row.status} ${waitMs} ms after its claim's answer was lost`,
    );
    await sleep(50);
  }
  assert.equal(relay.resets, 1, "a claim's answer was lost");
  const { events } = await client.recallConversation({ userId: "u", sessionId: "s", order: "asc" });
  assert.deepEqual(
    events.map((event) => event.content),
    ["I keep bees", "Noted, bees"],
  );
});
