/**
 * Deletion that deletes: a purged user's text is gone from every table of both stores — on SQLite
 * from the file's bytes, even before a vacuum — while another user's stays; the route and the tool
 * are the operator's only; a middleware of the same process stops serving its cached bundle.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, describe, it } from "node:test";
import { createToolSet } from "@tackle/core";
import { createMemoryAdminTools, MemoryClient, MemoryError } from "@tackle/memory";
import { type MemoryServer, serveMemory } from "@tackle/memory/server";
import { createTestDatabase, type TestDatabase, underLoadMs } from "@tackle/test-support";
import pg from "pg";
import { createMemoryMiddlewareCore } from "../src/middleware/create-memory-middleware-core.ts";

const gone = "Quokkazanzibar";
const kept = "Okapivaldivia";

/** Every kind of record for `userId`, each carrying `word`: memories and versions, events, documents, blocks, traces, jobs, keys. */
async function populate(client: MemoryClient, userId: string, word: string): Promise<void> {
  const scope = { userId, sessionId: `${userId}-chat` };
  const { memory } = await client.add({ ...scope, content: `My locker code is ${word} 4411.` });
  await client.updateMemory(memory.id, { content: `My locker code changed from ${word} to 5522.` });
  await client.recordFeedback(memory.id, { rating: "helpful" });
  await client.writeEvent({ ...scope, role: "user", content: `I live at ${word} Street and I love hiking.` });
  await client.ingestDocument({
    ...scope,
    title: `${word} notes`,
    content: `The ${word} project starts in May.`,
  });
  await client.selfEdit({ ...scope, edits: [{ op: "append", label: "human", text: `Goes by ${word}.` }] });
  await client.search({ ...scope, query: `what is the ${word} code` });
  await client.searchKnowledge({ ...scope, query: `${word} project` });
  await client.contextBundle({ ...scope, query: `tell me about ${word}` });
  await client.noveltyScan({ ...scope, candidates: [`${word} likes tea`] });
  const { job } = await client.importConversations({
    ...scope,
    format: "openai",
    conversations: [{ messages: [{ role: "user", content: `My cousin is called ${word}.` }] }],
  });
  await client.waitForJob(job.id, { timeoutMs: underLoadMs(30_000) });
}

async function checkAnswers(office: MemoryClient): Promise<void> {
  const purged = await office.purge({ userId: "gone" });
  assert.deepEqual(purged.scope, { userId: "gone" });
  for (const [kind, count] of Object.entries(purged.purged)) {
    if (kind === "accessRecords" || kind === "idempotencyKeys") assert.ok(count > 0, `${kind}: ${count}`);
    else assert.ok(count > 0, `purged some ${kind}`);
  }
  const again = await office.purge({ userId: "gone" });
  assert.ok(
    Object.values(again.purged).every((count) => count === 0),
    "a second purge finds nothing",
  );
  // Read back without searching for the word: a search is itself recorded, with its query.
  assert.deepEqual((await office.listTraces({ userId: "gone" })).traces, []);
  assert.deepEqual((await office.listJobs({ userId: "gone" })).jobs, []);
  const state = await office.unifiedState({ userId: "gone" });
  assert.equal(state.counts.memories.active + state.counts.events + state.counts.documents, 0);
  const stillThere = await office.search({ userId: "kept", query: kept });
  assert.ok(stillThere.results.length > 0, "the other user's memories are untouched");
  await assert.rejects(
    office.purge({}),
    (error: unknown) => MemoryError.isInstance(error) && error.status === 400,
  );
}

function serve(store: string): Promise<MemoryServer> {
  return serveMemory({
    store,
    apiKeys: { "key-office": "acme", "key-kept": { tenant: "acme", userId: "kept" } },
    port: 0,
  });
}

function clients(server: MemoryServer) {
  const options = { baseUrl: server.url, allowPrivateNetwork: true } as const;
  return {
    office: new MemoryClient({ ...options, apiKey: "key-office" }),
    user: new MemoryClient({ ...options, apiKey: "key-kept" }),
  };
}

describe("purge", () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-purge-"));
  let database: TestDatabase | undefined;
  after(async () => {
    await database?.drop();
    rmSync(directory, { recursive: true, force: true });
  });

  it("SQLite: the purged user's text is not in the file's bytes, after the purge and after a vacuum", async () => {
    const file = join(directory, "memory.db");
    const server = await serve(file);
    const { office } = clients(server);
    try {
      await populate(office, "gone", gone);
      await populate(office, "kept", kept);
      await checkAnswers(office);
    } finally {
      await server.close();
    }
    const bytes = () =>
      Buffer.concat(
        [file, `${file}-wal`].filter((path) => existsSync(path)).map((path) => readFileSync(path)),
      ).toString("latin1");
    // As the service left it (the purge checkpointed its log): no vacuum needed.
    assert.ok(bytes().includes(kept), "the scan sees text that was not purged");
    assert.ok(!bytes().includes(gone), "the purged text is in the file");
    assert.ok(!bytes().toLowerCase().includes(gone.toLowerCase()), "the full-text index keeps its terms");
    const opened = new DatabaseSync(file);
    opened.exec("PRAGMA wal_checkpoint(TRUNCATE); VACUUM; PRAGMA wal_checkpoint(TRUNCATE);");
    opened.close();
    assert.ok(bytes().includes(kept));
    assert.ok(!bytes().includes(gone), "the purged text is in the vacuumed file");
    assert.ok(!bytes().toLowerCase().includes(gone.toLowerCase()), "nor in the full-text index's terms");
  });

  it("PostgreSQL: no table holds the purged user's text; the other user's is still there", async () => {
    database = await createTestDatabase("memory_purge");
    const server = await serve(database.url);
    const { office } = clients(server);
    try {
      await populate(office, "gone", gone);
      await populate(office, "kept", kept);
      await checkAnswers(office);
    } finally {
      await server.close();
    }
    const sql = new pg.Client({ connectionString: database.url });
    await sql.connect();
    try {
      const tables = (
        await sql.query<{ name: string }>(
          "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
        )
      ).rows.map((row) => row.name);
      assert.ok(tables.includes("memory_memories") && tables.includes("memory_idempotency_keys"));
      const holding = async (word: string) => {
        const found: string[] = [];
        for (const table of tables) {
          const rows = await sql.query(
            `SELECT count(*)::int AS n FROM "${table}" AS t WHERE t::text ILIKE $1`,
            [`%${word}%`],
          );
          if ((rows.rows[0] as { n: number }).n > 0) found.push(table);
        }
        return found;
      };
      assert.deepEqual(await holding(gone), []);
      assert.ok((await holding(kept)).length >= 8, "the scan sees the other user's text in many tables");
    } finally {
      await sql.end();
    }
  });

  it("only an unbound key may purge, and the tool refuses a call made for an identity", async () => {
    const server = await serve(join(directory, "routes.db"));
    const { office, user } = clients(server);
    try {
      await user.add({ content: "Kept's own note" });
      await assert.rejects(
        user.purge({ userId: "kept" }),
        (error: unknown) => MemoryError.isInstance(error) && error.code === "scope_forbidden",
      );
      const tools = createToolSet(createMemoryAdminTools(office));
      const forUser = await tools.call(
        "memory_admin_purge",
        { userId: "kept" },
        { identity: { userId: "kept" } },
      );
      assert.equal(forUser.ok, false);
      assert.equal((await office.unifiedState({ userId: "kept" })).counts.memories.active, 1);
      const byOperator = await tools.call("memory_admin_purge", { userId: "kept" });
      assert.ok(byOperator.ok, JSON.stringify(byOperator));
      assert.equal((await office.unifiedState({ userId: "kept" })).counts.memories.active, 0);
    } finally {
      await server.close();
    }
  });

  it("a middleware's cached bundle of the purged user is dropped by a purge in the same process", async () => {
    const server = await serve(join(directory, "cache.db"));
    const { office } = clients(server);
    try {
      await office.add({ userId: "gone", content: `Call me ${gone}.` });
      const core = createMemoryMiddlewareCore({
        client: new MemoryClient({ baseUrl: server.url, apiKey: "key-office", allowPrivateNetwork: true }),
        apiUrl: server.url,
        apiKey: "key-office",
        mode: "wake-up",
      });
      const ask = [{ role: "user" as const, text: "hello" }];
      assert.match((await core.getContext({ userId: "gone" }, ask))?.text ?? "", new RegExp(gone));
      assert.match((await core.getContext({ userId: "gone" }, ask))?.text ?? "", new RegExp(gone), "cached");
      await office.purge({ userId: "gone" });
      assert.doesNotMatch((await core.getContext({ userId: "gone" }, ask))?.text ?? "", new RegExp(gone));
    } finally {
      await server.close();
    }
  });
});
