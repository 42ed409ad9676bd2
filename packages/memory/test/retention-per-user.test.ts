/**
 * Retention per user (ADR 0545) on a SQLite file and on PostgreSQL, through the service. One user's
 * flood of searches or jobs cuts only its own history: another user's traces and jobs — how they
 * audit what the model was shown — all stay, and the flooding user keeps its newest. The tenant's
 * cut stays the outer bound when many users, or made-up user ids, search.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { silentLogger } from "@tackle/core";
import {
  createMemoryService,
  createSqliteStore,
  type MemoryRetentionOptions,
  type MemoryService,
  type MemoryStore,
} from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase, type TestDatabase, underLoadMs } from "@tackle/test-support";
import pg from "pg";
import { createRetention } from "../src/service/retention.ts";

type Table = "memory_traces" | "memory_jobs";
/** A row as the store keeps it: whose it is, in write order. */
interface Kept {
  readonly id: string;
  readonly userId: string | null;
}

interface Subject {
  open(): Promise<MemoryStore>;
  /** The tenant's rows of `table`, oldest first, read from outside the service. */
  rows(table: Table, tenantId: string): Promise<Kept[]>;
}

const keptSql = (table: Table, parameter: string) =>
  `SELECT id, user_id AS "userId" FROM ${table} WHERE tenant_id = ${parameter} ORDER BY seq`;

function sqliteSubject(path: string): Subject {
  return {
    open: async () => createSqliteStore({ path }),
    rows: async (table, tenantId) => {
      const database = new DatabaseSync(path);
      try {
        const rows = database.prepare(keptSql(table, "?")).all(tenantId) as unknown as Kept[];
        return rows.map((row) => ({ ...row }));
      } finally {
        database.close();
      }
    },
  };
}

function postgresSubject(url: string): Subject {
  return {
    open: () => createPostgresStore({ connectionString: url }),
    rows: async (table, tenantId) => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        return (await client.query(keptSql(table, "$1"), [tenantId])).rows;
      } finally {
        await client.end();
      }
    },
  };
}

/** A clock a second further on at every read, so every row has a time of its own. */
function tickingClock(start: string) {
  let at = Date.parse(start);
  return () => {
    at += 1_000;
    return new Date(at);
  };
}

async function withService<T>(
  subject: Subject,
  retention: MemoryRetentionOptions,
  body: (service: MemoryService) => Promise<T>,
): Promise<T> {
  const service = createMemoryService({
    store: await subject.open(),
    now: tickingClock("2026-06-01T08:00:00.000Z"),
    retention,
  });
  try {
    return await body(service);
  } finally {
    // Closing waits for the cuts the searches and jobs set off.
    await service.close();
  }
}

const ofUser = (rows: readonly Kept[], userId: string | null) =>
  rows.filter((row) => row.userId === userId).map((row) => row.id);

async function checkSearchFlood(subject: Subject) {
  const tenantId = "searches";
  const retention = { maxTracesPerTenant: 400, maxTracesPerUser: 50 };
  const { bob, ada } = await withService(subject, retention, async (service) => {
    await service.add(tenantId, { userId: "bob", content: "Bob keeps bees in Porto" });
    await service.add(tenantId, { userId: "ada", content: "Ada rides trains to Kyoto" });
    const bob: string[] = [];
    for (let index = 0; index < 20; index += 1) {
      bob.push((await service.search(tenantId, { userId: "bob", query: `bees ${index}` })).traceId);
    }
    // Ada searches thirty times Bob's history, eight times the tenant's room for her.
    const ada: string[] = [];
    for (let index = 0; index < 600; index += 1) {
      ada.push((await service.search(tenantId, { userId: "ada", query: `trains ${index}` })).traceId);
    }
    return { bob, ada };
  });
  const kept = await subject.rows("memory_traces", tenantId);
  assert.deepEqual(ofUser(kept, "bob"), bob, "every one of Bob's traces stays");
  assert.deepEqual(ofUser(kept, "ada"), ada.slice(-50), "Ada keeps her newest 50");
  await withService(subject, retention, async (service) => {
    const { traces } = await service.listTraces(tenantId, { userId: "bob", limit: 200 });
    assert.deepEqual(traces.map((trace) => trace.id).reverse(), bob, "Bob reads back his whole history");
  });
}

async function checkManyUsers(subject: Subject) {
  const tenantId = "crowd";
  const retention = { maxTracesPerTenant: 100, maxTracesPerUser: 5 };
  const searched: Kept[] = [];
  const search = async (service: MemoryService, userId: string, query: string) => {
    const { traceId } = await service.search(tenantId, { userId, query });
    searched.push({ id: traceId, userId });
  };
  // Forty users of ten searches each: each keeps its newest 5, and the tenant the newest 100 of those.
  await withService(subject, retention, async (service) => {
    for (let round = 0; round < 10; round += 1) {
      for (let user = 0; user < 40; user += 1) await search(service, `user-${user}`, `round ${round}`);
    }
  });
  assert.deepEqual(await subject.rows("memory_traces", tenantId), searched.slice(-100));
  // Then 300 made-up user ids of one search each: the tenant still keeps its newest 100.
  await withService(subject, retention, async (service) => {
    for (let index = 0; index < 300; index += 1) await search(service, `made-up-${index}`, "anything");
  });
  assert.deepEqual(await subject.rows("memory_traces", tenantId), searched.slice(-100));
}

async function finished(service: MemoryService, tenantId: string, jobId: string) {
  const deadline = Date.now() + underLoadMs(30_000);
  for (;;) {
    const { job } = await service.getJob(tenantId, jobId);
    if (job.status === "succeeded" || job.status === "failed") return job;
    if (Date.now() > deadline) throw new Error(`job ${jobId} still ${job.status}`);
    await sleep(20);
  }
}

async function checkJobFlood(subject: Subject) {
  const tenantId = "jobs";
  const retention = { maxFinishedJobsPerTenant: 40, maxFinishedJobsPerUser: 10 };
  const { bob, ada, imported } = await withService(subject, retention, async (service) => {
    const { job } = await service.importConversations(tenantId, {
      userId: "ada",
      format: "openai",
      conversations: [{ messages: [{ role: "user", content: "I keep a cat named Figo in Porto." }] }],
    });
    const bob: string[] = [];
    for (let index = 0; index < 3; index += 1) {
      bob.push((await service.noveltyScan(tenantId, { userId: "bob", candidates: [`bees ${index}`] })).jobId);
    }
    const ada: string[] = [];
    for (let index = 0; index < 60; index += 1) {
      ada.push((await service.noveltyScan(tenantId, { userId: "ada", candidates: [`cats ${index}`] })).jobId);
    }
    assert.equal((await finished(service, tenantId, job.id)).status, "succeeded");
    return { bob, ada, imported: job.id };
  });
  const kept = await subject.rows("memory_jobs", tenantId);
  assert.deepEqual(ofUser(kept, "bob"), bob, "every one of Bob's jobs stays");
  // Her import stored events: their provenance, kept beside her newest ten scans.
  assert.deepEqual(ofUser(kept, "ada"), [imported, ...ada.slice(-10)]);
}

describe("retention per user: a SQLite file", () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-retention-user-"));
  after(() => rmSync(directory, { recursive: true, force: true }));
  const subject = () => sqliteSubject(join(directory, "per-user.db"));

  it("600 searches by one user leave another's traces whole and her own newest 50", async () => {
    await checkSearchFlood(subject());
  });

  it("the tenant's cut bounds many users and made-up user ids", async () => {
    await checkManyUsers(subject());
  });

  it("60 jobs by one user leave another's jobs whole, her newest 10 and her import", async () => {
    await checkJobFlood(subject());
  });

  it("a user's count pushed out by churn of other user ids is cut, not forgotten", async () => {
    // The service counts inserts of at most 10,000 tenants and users each; past that, counts of
    // 10,001 other (made-up) user ids between two of Ada's traces must not keep her from her cut.
    const store = createSqliteStore({ path: join(directory, "churn.db") });
    const retention = createRetention(
      store,
      { maxTracesPerTenant: 1_000_000, maxTracesPerUser: 11 },
      () => new Date("2026-06-01T08:00:00.000Z"),
      silentLogger,
    );
    try {
      for (let round = 0; round < 15; round += 1) {
        await store.insertTrace(
          {
            id: `ada-${round}`,
            tenantId: "churned",
            userId: "ada",
            operation: "search",
            query: `trains ${round}`,
            ranking: "bm25",
            results: [],
            durationMs: 1,
            createdAt: `2026-06-01T08:00:${String(round).padStart(2, "0")}.000Z`,
          },
          [],
        );
        retention.traceRecorded("churned", "ada");
        for (let index = 0; index <= 10_000; index += 1) retention.traceRecorded("crowd", `made-up-${index}`);
      }
    } finally {
      await retention.close();
      await store.close();
    }
    const kept = await sqliteSubject(join(directory, "churn.db")).rows("memory_traces", "churned");
    assert.deepEqual(
      kept.map((row) => row.id),
      Array.from({ length: 11 }, (_, index) => `ada-${index + 4}`),
    );
  });

  it("refuses a user's limit that is not a whole number or exceeds its tenant's", async () => {
    const store = createSqliteStore({ path: join(directory, "options.db") });
    try {
      assert.throws(
        () => createMemoryService({ store, retention: { maxTracesPerUser: 0 } }),
        /retention\.maxTracesPerUser must be a whole number of at least 1, not 0/,
      );
      assert.throws(
        () => createMemoryService({ store, retention: { maxFinishedJobsPerUser: 2.5 } }),
        /retention\.maxFinishedJobsPerUser must be a whole number of at least 1, not 2\.5/,
      );
      assert.throws(
        () => createMemoryService({ store, retention: { maxTracesPerTenant: 50, maxTracesPerUser: 51 } }),
        /retention\.maxTracesPerUser must be at most retention\.maxTracesPerTenant \(50\), not 51/,
      );
    } finally {
      await store.close();
    }
  });
});

describe("retention per user: PostgreSQL", () => {
  const databases: TestDatabase[] = [];
  after(async () => {
    for (const database of databases) await database.drop();
  });
  const subject = async () => {
    const database = await createTestDatabase("tackle_memory_retention_user");
    databases.push(database);
    return postgresSubject(database.url);
  };

  it("600 searches by one user leave another's traces whole and her own newest 50", async () => {
    await checkSearchFlood(await subject());
  });

  it("the tenant's cut bounds many users and made-up user ids", async () => {
    await checkManyUsers(await subject());
  });

  it("60 jobs by one user leave another's jobs whole, her newest 10 and her import", async () => {
    await checkJobFlood(await subject());
  });
});
