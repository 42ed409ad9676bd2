/**
 * Per-tenant storage quotas (ADR 0538) on a SQLite file and on PostgreSQL: a write past a limit is
 * refused `quota_exceeded` exactly at the bound and stores nothing; duplicates cost nothing; purge
 * gives room back; concurrent writers racing for the last places never pass the limit; the migration
 * counts rows stored before it; other tenants keep writing; the HTTP API answers 409 with the data.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import {
  createMemoryService,
  createSqliteStore,
  MemoryError,
  type MemoryQuotaOptions,
  type MemoryService,
  type MemoryStore,
} from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { serveMemory } from "@tackle/memory/server";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import pg from "pg";

interface Subject {
  readonly name: string;
  open(): Promise<MemoryStore>;
  /** Memory rows of the tenant, any status, counted from outside the service. */
  memoryRows(tenantId: string): Promise<number>;
  /** Drops the counters and steps the schema back one version, as a store made before quotas. */
  forgetQuotas(): Promise<void>;
}

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-quotas-"));
const databases: TestDatabase[] = [];
after(async () => {
  for (const database of databases) await database.drop();
  rmSync(directory, { recursive: true, force: true });
});

let files = 0;
function sqliteSubject(): Subject {
  files += 1;
  const path = join(directory, `quotas-${files}.db`);
  const withDatabase = <T>(body: (database: DatabaseSync) => T): T => {
    const database = new DatabaseSync(path);
    try {
      return body(database);
    } finally {
      database.close();
    }
  };
  return {
    name: "SQLite file",
    open: async () => createSqliteStore({ path }),
    memoryRows: async (tenantId) =>
      withDatabase((database) =>
        Number(
          (
            database
              .prepare("SELECT count(*) AS n FROM memory_memories WHERE tenant_id = ?")
              .get(tenantId) as { n: number }
          ).n,
        ),
      ),
    forgetQuotas: async () =>
      withDatabase((database) => database.exec("DROP TABLE memory_tenant_usage; PRAGMA user_version = 7;")),
  };
}

async function postgresSubject(): Promise<Subject> {
  const database = await createTestDatabase("tackle_memory_quotas");
  databases.push(database);
  const query = async (sql: string, parameters: unknown[] = []) => {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      return (await client.query(sql, parameters)).rows;
    } finally {
      await client.end();
    }
  };
  return {
    name: "PostgreSQL",
    open: () => createPostgresStore({ connectionString: database.url }),
    memoryRows: async (tenantId) =>
      (await query("SELECT count(*)::int AS n FROM memory_memories WHERE tenant_id = $1", [tenantId]))[0].n,
    forgetQuotas: async () => {
      await query("DROP TABLE memory_tenant_usage");
      await query("DELETE FROM tackle_migrations WHERE store = 'memory' AND version >= 9");
    },
  };
}

async function withService<T>(
  subject: Subject,
  quotas: MemoryQuotaOptions,
  body: (service: MemoryService, store: MemoryStore) => Promise<T>,
): Promise<T> {
  const store = await subject.open();
  const service = createMemoryService({ store, quotas, resumeJobs: false });
  try {
    return await body(service, store);
  } finally {
    await service.close();
  }
}

/** The `quota_exceeded` refusal's data, or a failure naming what came instead. */
async function refusal(write: Promise<unknown>): Promise<Record<string, unknown>> {
  try {
    await write;
  } catch (error) {
    assert.ok(MemoryError.isInstance(error), `expected a MemoryError, got ${String(error)}`);
    assert.equal(error.code, "quota_exceeded", error.message);
    assert.equal(error.status, 409);
    assert.equal(error.retryable, false);
    return error.data as Record<string, unknown>;
  }
  assert.fail("the write was not refused");
}

const bytes = (text: string) => Buffer.byteLength(text, "utf8");

async function checkBounds(subject: Subject) {
  await withService(
    subject,
    { maxMemories: 3, maxMemoryBytes: 1_000, maxEvents: 2, maxEventBytes: 1_000, maxDocumentBytes: 40 },
    async (service, store) => {
      const tenant = "rows";
      const scope = { userId: "ada" };
      for (const content of ["Ada likes tea", "Ada lives in Lisbon", "Ada plays the cello"]) {
        assert.equal((await service.add(tenant, { ...scope, content })).created, true);
      }
      // A duplicate stores nothing and is answered, full or not.
      assert.equal((await service.add(tenant, { ...scope, content: "Ada likes tea" })).created, false);
      assert.deepEqual(await refusal(service.add(tenant, { ...scope, content: "Ada reads maps" })), {
        kind: "memories",
        limit: 3,
        used: 3,
        requested: 1,
      });
      // A batch that would pass the limit is refused whole.
      assert.equal(
        (await refusal(service.addBatch(tenant, { ...scope, memories: [{ content: "x one" }] }))).kind,
        "memories",
      );
      assert.equal(await subject.memoryRows(tenant), 3);

      // Other tenants are unaffected.
      assert.equal((await service.add("other", { ...scope, content: "Ada reads maps" })).created, true);

      // A soft delete is never refused and keeps its row (and its count) until purged.
      const [first] = (await service.listMemories(tenant, { ...scope, limit: 1 })).memories;
      await service.deleteMemory(tenant, first!.id, { reason: "no longer true" });
      await refusal(service.add(tenant, { ...scope, content: "Ada reads maps" }));
      const purged = await service.purge(tenant, { userId: "ada" });
      assert.equal(purged.purged.memories, 3);
      assert.equal((await store.usage(tenant)).memories, 0);
      assert.equal((await service.add(tenant, { ...scope, content: "Ada reads maps" })).created, true);

      // Events: rows, and a repeat of a custom id costs nothing.
      const event = (content: string, customId: string) => ({
        ...scope,
        sessionId: "s1",
        role: "user" as const,
        content,
        customId,
      });
      await service.writeEvent(tenant, event("hello", "e1"));
      await service.writeEvent(tenant, event("hello", "e1"));
      await service.writeEvent(tenant, event("again", "e2"));
      assert.deepEqual(await refusal(service.writeEvent(tenant, event("third", "e3"))), {
        kind: "events",
        limit: 2,
        used: 2,
        requested: 1,
      });

      // Documents: bytes, exactly at the bound.
      const text = "é".repeat(10); // 20 bytes
      assert.equal(
        (await service.ingestDocument(tenant, { ...scope, title: "one", content: text })).created,
        true,
      );
      const again = "ü".repeat(10);
      assert.equal(
        (await service.ingestDocument(tenant, { ...scope, title: "two", content: again })).created,
        true,
      );
      assert.equal(
        (await service.ingestDocument(tenant, { ...scope, title: "one", content: text })).created,
        false,
      );
      assert.deepEqual(
        await refusal(service.ingestDocument(tenant, { ...scope, title: "three", content: "z" })),
        {
          kind: "documentBytes",
          limit: 40,
          used: 40,
          requested: 1,
        },
      );

      const status = await service.status(tenant);
      // Each event also stored an episode memory (the session's turns), which counts as a memory.
      assert.deepEqual(status.quotas?.memories, { used: 3, limit: 3 });
      assert.deepEqual(status.quotas?.events, { used: 2, limit: 2 });
      assert.deepEqual(status.quotas?.documentBytes, { used: 40, limit: 40 });
    },
  );
}

/** Bytes of memories and events, exactly at the bound; an edit's new version counts. */
async function checkByteBounds(subject: Subject) {
  await withService(
    subject,
    { maxMemoryBytes: 30, maxEventBytes: 10, maxMemories: Number.POSITIVE_INFINITY },
    async (service, store) => {
      const tenant = "bytes";
      const scope = { userId: "bo" };
      const a = await service.add(tenant, { ...scope, content: "0123456789" });
      await service.add(tenant, { ...scope, content: "abcdefghij" });
      assert.deepEqual(await refusal(service.add(tenant, { ...scope, content: "ABCDEFGHIJK" })), {
        kind: "memoryBytes",
        limit: 30,
        used: 20,
        requested: 11,
      });
      await service.updateMemory(tenant, a.memory.id, { content: "9876543210" });
      assert.equal((await store.usage(tenant)).memoryBytes, 30);
      await refusal(service.updateMemory(tenant, a.memory.id, { content: "x" }));
      assert.equal((await service.getMemory(tenant, a.memory.id)).memory.content, "9876543210");
      // Another tenant: an event also stores its session's episode, a memory (bytes of its own).
      const talker = "bytes-events";
      const event = { ...scope, sessionId: "s", role: "user" as const, infer: false };
      await service.writeEvent(talker, { ...event, content: "ñandú!" }); // 8 bytes
      assert.deepEqual(await refusal(service.writeEvent(talker, { ...event, content: "abc" })), {
        kind: "eventBytes",
        limit: 10,
        used: 8,
        requested: 3,
      });
      await service.writeEvent(talker, { ...event, content: "ab" });
      assert.equal((await store.usage(talker)).eventBytes, 10);
      assert.equal(bytes("ñandú!"), 8);
    },
  );
}

/** Random concurrent adds and purges against a counting oracle: never past the limit, counter exact. */
async function checkRaces(subject: Subject, rounds: number) {
  const limit = 5;
  const tenant = "race";
  let seed = 42;
  const random = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
    return seed / 2_147_483_648;
  };
  let written = 0;
  let refused = 0;
  let purgedRows = 0;
  await withService(subject, { maxMemories: limit }, async (service, store) => {
    for (let round = 0; round < rounds; round += 1) {
      const before = await subject.memoryRows(tenant);
      const users = ["u0", "u1", "u2"];
      const operations = Array.from({ length: 6 }, (_, index) => {
        const userId = users[Math.floor(random() * users.length)]!;
        if (random() < 0.15) {
          return service
            .purge(tenant, { userId })
            .then((answer) => ({ added: 0, purged: answer.purged.memories, refused: 0 }));
        }
        const content = `fact ${round} ${index} ${Math.floor(random() * 1e9)}`;
        return service.add(tenant, { userId, content }).then(
          (answer) => ({ added: answer.created ? 1 : 0, purged: 0, refused: 0 }),
          (error: unknown) => {
            assert.ok(MemoryError.isInstance(error) && error.code === "quota_exceeded", String(error));
            return { added: 0, purged: 0, refused: 1 };
          },
        );
      });
      const outcomes = await Promise.all(operations);
      const added = outcomes.reduce((sum, outcome) => sum + outcome.added, 0);
      const purged = outcomes.reduce((sum, outcome) => sum + outcome.purged, 0);
      const rows = await subject.memoryRows(tenant);
      written += added;
      purgedRows += purged;
      refused += outcomes.reduce((sum, outcome) => sum + outcome.refused, 0);
      assert.ok(rows <= limit, `round ${round}: ${rows} rows, over the limit ${limit}`);
      assert.equal(rows, before + added - purged, `round ${round}: rows`);
      assert.equal((await store.usage(tenant)).memories, rows, `round ${round}: the counter`);
      if (purged === 0 && outcomes.some((outcome) => outcome.refused)) {
        assert.equal(rows, limit, `round ${round}: refused while there was room`);
      }
    }
  });
  console.log(`${subject.name}: ${JSON.stringify({ rounds, written, refused, purgedRows })}`);
  assert.ok(written > limit && refused > 0, `the rounds wrote ${written} and refused ${refused}`);
}

async function checkMigration(subject: Subject) {
  const tenant = "old";
  const expected = await withService(subject, {}, async (service, store) => {
    const scope = { userId: "cy" };
    const memory = await service.add(tenant, { ...scope, content: "Cy drinks mate" });
    await service.updateMemory(tenant, memory.memory.id, { content: "Cy drinks mate at noon" });
    await service.add(tenant, { ...scope, content: "Cy runs on Sundays" });
    await service.writeEvent(tenant, {
      ...scope,
      sessionId: "s",
      role: "user",
      content: "olá",
      infer: false,
    });
    await service.ingestDocument(tenant, { ...scope, title: "doc", content: "a short document" });
    await service.add("neighbour", { userId: "x", content: "elsewhere" });
    return store.usage(tenant);
  });
  assert.deepEqual(expected, {
    // The event's episode (a memory holding the session's turns) counts as a memory too.
    memories: 3,
    memoryBytes:
      bytes("Cy drinks mate") + bytes("Cy drinks mate at noon") + bytes("Cy runs on Sundays") + bytes("olá"),
    events: 1,
    eventBytes: bytes("olá"),
    documentBytes: bytes("a short document"),
    // Metadata (ADR 0556): the `{}` of each memory version, the event and the document costs
    // nothing (ADR 0559), nor does the speaker and role the service writes on the episode (ADR 0563).
    metadataBytes: 0,
  });
  await subject.forgetQuotas();
  const store = await subject.open();
  try {
    assert.deepEqual(await store.usage(tenant), expected);
    assert.equal((await store.usage("neighbour")).memories, 1);
  } finally {
    await store.close();
  }
}

async function checkImport(subject: Subject) {
  await withService(subject, { maxEvents: 150 }, async (service) => {
    const tenant = "importer";
    const messages = Array.from({ length: 250 }, (_, index) => ({
      role: index % 2 === 0 ? "user" : "assistant",
      content: `turn number ${index}`,
    }));
    const { job } = await service.importConversations(tenant, {
      userId: "di",
      sessionId: "s",
      format: "openai",
      conversations: [{ messages }],
    });
    const deadline = Date.now() + 30_000;
    for (;;) {
      const { job: now } = await service.getJob(tenant, job.id);
      if (now.status === "failed") {
        assert.equal(now.error?.code, "quota_exceeded");
        // Batches of 100 turns: the first stored whole, the second refused whole.
        assert.deepEqual((now.result as { events: { created: number } }).events.created, 100);
        break;
      }
      assert.notEqual(now.status, "succeeded", "the import passed the quota");
      assert.ok(Date.now() < deadline, "the import did not finish in time");
      await sleep(5);
    }
    const { events } = await service.recallConversation(tenant, { sessionId: "s", limit: 200, order: "asc" });
    assert.equal(events.length, 100);
  });
}

for (const make of [async () => sqliteSubject(), postgresSubject]) {
  describe("storage quotas", () => {
    it("refuses exactly at each bound, stores nothing, spares duplicates and other tenants", async () => {
      const subject = await make();
      await checkBounds(subject);
      await checkByteBounds(subject);
    });
    it("never passes the limit while writers race for the last places and purges give room", async () => {
      await checkRaces(await make(), 200);
    });
    it("fills the counters from rows stored before the migration", async () => {
      await checkMigration(await make());
    });
    it("stops an import at the batch past the quota; its result says what was stored", async () => {
      await checkImport(await make());
    });
  });
}

describe("storage quotas over HTTP", () => {
  it("answers 409 quota_exceeded with its data; no idempotency answer is kept for it", async () => {
    const server = await serveMemory({
      store: join(directory, "http.db"),
      apiKeys: { "key-a": "tenant-a", "key-b": "tenant-b" },
      port: 0,
      quotas: { maxMemories: 1 },
    });
    try {
      const post = (key: string, content: string, idempotencyKey?: string) =>
        fetch(`${server.url}/v1/memories`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${key}`,
            "content-type": "application/json",
            ...(idempotencyKey ? { "idempotency-key": idempotencyKey } : {}),
          },
          body: JSON.stringify({ userId: "u", content }),
        });
      assert.equal((await post("key-a", "first fact")).status, 200);
      const refused = await post("key-a", "second fact", "k-1");
      assert.equal(refused.status, 409);
      assert.deepEqual(((await refused.json()) as { error: unknown }).error, {
        code: "quota_exceeded",
        message:
          "The tenant's memories quota is 1; it uses 1 and this write needs 1 more. Purge what is no longer needed, or raise the quota",
        retryable: false,
        data: { kind: "memories", limit: 1, used: 1, requested: 1 },
      });
      assert.equal((await post("key-b", "second fact")).status, 200);
      const status = await fetch(`${server.url}/v1/status`, { headers: { authorization: "Bearer key-a" } });
      assert.deepEqual(((await status.json()) as { quotas: unknown }).quotas, {
        memories: { used: 1, limit: 1 },
        memoryBytes: { used: bytes("first fact"), limit: 1024 ** 3 },
        events: { used: 0, limit: 10_000_000 },
        eventBytes: { used: 0, limit: 4 * 1024 ** 3 },
        documentBytes: { used: 0, limit: 1024 ** 3 },
        metadataBytes: { used: 0, limit: 1024 ** 3 },
        coreBlocks: { used: 0, limit: 10_000 },
        coreBlockBytes: { used: 0, limit: 64 * 1024 ** 2 },
        queuedJobs: { used: 0, limit: 100 },
      });
      const purged = await fetch(`${server.url}/v1/admin/purge`, {
        method: "POST",
        headers: { authorization: "Bearer key-a", "content-type": "application/json" },
        body: JSON.stringify({ userId: "u" }),
      });
      assert.equal(purged.status, 200);
      // The refused write under k-1 kept no answer: sent again once there is room, it is stored.
      assert.equal((await post("key-a", "second fact", "k-1")).status, 200);
    } finally {
      await server.close();
    }
  });
});
