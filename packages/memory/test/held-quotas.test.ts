/**
 * What a tenant holds beyond ADR 0538's counters (ADR 0551), on a SQLite file and on PostgreSQL: core
 * blocks are bounded per tenant over every scope (blocks and bytes), a finished job keeps no input,
 * and jobs waiting to run are bounded per tenant. Each flood was accepted whole before the change.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createMemoryService, createSqliteStore, MemoryError, type MemoryStore } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import pg from "pg";

interface Subject {
  readonly name: string;
  /** Steps the schema back before ADR 0551's migration, as a store made before it. */
  readonly before0551: string;
  open(): Promise<MemoryStore>;
  /** One row of a query run from outside the service (`?` marks, rewritten for PostgreSQL). */
  row(sql: string, parameters: unknown[]): Promise<Record<string, unknown>>;
}

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-held-"));
const databases: TestDatabase[] = [];
after(async () => {
  for (const database of databases) await database.drop();
  rmSync(directory, { recursive: true, force: true });
});

let files = 0;
function sqliteSubject(): Subject {
  files += 1;
  const path = join(directory, `held-${files}.db`);
  return {
    name: "SQLite file",
    before0551: "PRAGMA user_version = 10",
    open: async () => createSqliteStore({ path }),
    row: async (sql, parameters) => {
      const database = new DatabaseSync(path);
      try {
        // SQLite's UTF-8 length of a text column is the length of its bytes.
        const sqliteSql = sql.replaceAll(
          /octet_length\(([^()]*(?:\([^()]*\))?[^()]*)\)/g,
          "length(CAST($1 AS BLOB))",
        );
        return database.prepare(sqliteSql).get(...(parameters as never[])) as never;
      } finally {
        database.close();
      }
    },
  };
}

async function postgresSubject(): Promise<Subject> {
  const database = await createTestDatabase("tackle_memory_held");
  databases.push(database);
  return {
    name: "PostgreSQL",
    before0551: "DELETE FROM tackle_migrations WHERE store = 'memory' AND version >= 12",
    open: () => createPostgresStore({ connectionString: database.url }),
    row: async (sql, parameters) => {
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      try {
        let n = 0;
        return (
          await client.query(
            sql.replaceAll("?", () => `$${++n}`),
            parameters,
          )
        ).rows[0];
      } finally {
        await client.end();
      }
    },
  };
}

async function refusal(write: Promise<unknown>): Promise<Record<string, unknown>> {
  try {
    await write;
  } catch (error) {
    assert.ok(MemoryError.isInstance(error), `expected a MemoryError, got ${String(error)}`);
    assert.equal(error.code, "quota_exceeded", error.message);
    assert.equal(error.status, 409);
    return error.data as Record<string, unknown>;
  }
  assert.fail("the write was not refused");
}

const heldBlocks = async (subject: Subject, tenant: string) => {
  const row = await subject.row(
    "SELECT count(*) AS blocks, coalesce(sum(octet_length(value)), 0) AS bytes FROM memory_core_blocks WHERE tenant_id = ?",
    [tenant],
  );
  return { blocks: Number(row.blocks), bytes: Number(row.bytes) };
};

/** 50 scopes each asking for a block of 20,000 characters: only what fits the tenant's bytes is kept. */
async function checkBlockFlood(subject: Subject) {
  const store = await subject.open();
  const service = createMemoryService({
    store,
    quotas: { maxCoreBlocks: 20, maxCoreBlockBytes: 60_000 },
    resumeJobs: false,
  });
  const tenant = "blocks";
  const big = (scope: number, label = "notes") =>
    service.selfEdit(tenant, {
      userId: `u${scope}`,
      edits: [{ op: "create", label, limit: 20_000, text: "é".repeat(10_000) }],
    });
  try {
    let kept = 0;
    const refusals: Record<string, unknown>[] = [];
    for (let scope = 0; scope < 50; scope += 1) {
      try {
        await big(scope);
        kept += 1;
      } catch (error) {
        if (!(MemoryError.isInstance(error) && error.code === "quota_exceeded")) throw error;
        refusals.push(error.data as Record<string, unknown>);
      }
    }
    assert.equal(kept, 3, "blocks of 20,000 bytes kept under 60,000");
    assert.deepEqual(refusals[0], { kind: "coreBlockBytes", limit: 60_000, used: 60_000, requested: 20_000 });
    // Each scope holds its notes and the two blocks every scope starts with (empty).
    assert.deepEqual(await heldBlocks(subject, tenant), { blocks: 9, bytes: 60_000 });
    // A refused save keeps none of its edits (the small block with the big one).
    await refusal(
      service.selfEdit(tenant, {
        userId: "u0",
        edits: [
          { op: "create", label: "small", limit: 10, text: "a" },
          { op: "create", label: "large", limit: 20_000, text: "x".repeat(20_000) },
        ],
      }),
    );
    assert.deepEqual(await heldBlocks(subject, tenant), { blocks: 9, bytes: 60_000 });
    // Shrinking passes at the limit; the room it frees is taken again.
    await service.selfEdit(tenant, { userId: "u0", edits: [{ op: "rewrite", label: "notes", text: "" }] });
    await big(3);
    // Other tenants are unaffected.
    await service.selfEdit("neighbour", {
      userId: "u0",
      edits: [{ op: "create", label: "notes", limit: 20_000, text: "y".repeat(20_000) }],
    });
    // The blocks' number: twelve held, a new scope's two and six small ones fill the twenty.
    assert.equal((await heldBlocks(subject, tenant)).blocks, 12);
    const labels = ["a1", "a2", "a3", "a4", "a5", "a6"];
    await service.selfEdit(tenant, {
      userId: "u9",
      edits: labels.map((label) => ({ op: "create" as const, label, limit: 5, text: "" })),
    });
    assert.deepEqual(
      await refusal(
        service.selfEdit(tenant, {
          userId: "u9",
          edits: [{ op: "create", label: "a7", limit: 5, text: "" }],
        }),
      ),
      { kind: "coreBlocks", limit: 20, used: 20, requested: 1 },
    );
    // A purge gives the room back.
    await service.purge(tenant, { userId: "u1" });
    await big(10);
    assert.deepEqual(await heldBlocks(subject, tenant), { blocks: 20, bytes: 60_000 });
  } finally {
    await service.close();
  }
}

async function waitFinished(service: ReturnType<typeof createMemoryService>, tenant: string, id: string) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const { job } = await service.getJob(tenant, id);
    if (job.status === "succeeded" || job.status === "failed") return job;
    assert.ok(Date.now() < deadline, "the import did not finish in time");
    await sleep(5);
  }
}

/** Eight imports of ~400 KB each: once finished, their jobs keep their outcome and no input. */
async function checkImportInputs(subject: Subject) {
  const store = await subject.open();
  const service = createMemoryService({ store, resumeJobs: false });
  const tenant = "importer";
  try {
    let sent = 0;
    for (let index = 0; index < 8; index += 1) {
      const messages = Array.from({ length: 40 }, (_, turn) => ({
        role: turn % 2 === 0 ? "user" : "assistant",
        content: `import ${index} turn ${turn} ${"z".repeat(10_000)}`,
      }));
      const request = {
        userId: "di",
        sessionId: `s${index}`,
        format: "openai" as const,
        conversations: [{ messages }],
        infer: false,
      };
      sent += Buffer.byteLength(JSON.stringify(request));
      const { job } = await service.importConversations(tenant, request);
      const finished = await waitFinished(service, tenant, job.id);
      assert.equal(finished.status, "succeeded", JSON.stringify(finished.error));
      assert.equal((finished.result as { events: { created: number } }).events.created, 40);
      assert.equal(finished.input, null, "a finished job keeps no input");
    }
    const held = await subject.row(
      "SELECT count(*) AS jobs, coalesce(sum(octet_length(CAST(input AS TEXT))), 0) AS bytes FROM memory_jobs WHERE tenant_id = ?",
      [tenant],
    );
    assert.equal(Number(held.jobs), 8, "the jobs and their outcomes stay");
    assert.ok(Number(held.bytes) <= 8 * 4, `${held.bytes} bytes of input kept after ${sent} sent`);
    // The turns are stored as events: nothing of the import was lost with its input.
    const { events } = await service.recallConversation(tenant, {
      sessionId: "s7",
      limit: 100,
      order: "asc",
    });
    assert.equal(events.length, 40);
  } finally {
    await service.close();
  }
}

const limits = {
  memories: Infinity,
  memoryBytes: Infinity,
  events: Infinity,
  eventBytes: Infinity,
  documentBytes: Infinity,
  coreBlocks: Infinity,
  coreBlockBytes: Infinity,
  queuedJobs: 3,
};

const queuedJob = (tenantId: string, input: unknown = { conversations: ["x".repeat(1_000)] }) => ({
  id: randomUUID(),
  tenantId,
  type: "import" as const,
  status: "queued" as const,
  userId: "q",
  input,
  createdAt: new Date().toISOString(),
});

/** Jobs waiting to run: the fourth is refused; a finished one frees its place and drops its input. */
async function checkQueuedJobs(subject: Subject) {
  const store = await subject.open();
  const tenant = "queue";
  try {
    const jobs = [queuedJob(tenant), queuedJob(tenant), queuedJob(tenant)];
    for (const job of jobs) await store.insertJob(job, limits);
    for (let index = 0; index < 10; index += 1) {
      assert.deepEqual(await refusal(store.insertJob(queuedJob(tenant), limits)), {
        kind: "queuedJobs",
        limit: 3,
        used: 3,
        requested: 1,
      });
    }
    // Another tenant's queue, and a job recorded finished, are not held to it.
    await store.insertJob(queuedJob("other"), limits);
    await store.insertJob(
      { ...queuedJob(tenant), status: "succeeded", finishedAt: new Date().toISOString() },
      limits,
    );
    const finished = {
      ...jobs[0]!,
      status: "succeeded" as const,
      result: { ok: 1 },
      finishedAt: new Date().toISOString(),
    };
    await store.updateJob(finished);
    const stored = await store.getJob(tenant, finished.id);
    assert.equal(stored?.input, null);
    assert.deepEqual(stored?.result, { ok: 1 });
    await store.insertJob(queuedJob(tenant), limits);
    await refusal(store.insertJob(queuedJob(tenant), limits));
    const held = await subject.row(
      "SELECT count(*) AS n FROM memory_jobs WHERE tenant_id = ? AND status IN ('queued', 'running')",
      [tenant],
    );
    assert.equal(Number(held.n), 3);
  } finally {
    await store.close();
  }
}

/** Jobs finished before the migration give their inputs' room back; waiting jobs keep theirs. */
async function checkMigration(subject: Subject) {
  const tenant = "old";
  const [finished, waiting] = [queuedJob(tenant), queuedJob(tenant)];
  let store = await subject.open();
  await store.insertJob(finished);
  await store.insertJob(waiting);
  await store.close();
  // As a job finished before the change left it: its outcome beside its input.
  await subject.row(
    `UPDATE memory_jobs SET status = 'succeeded', result = '{"ok":1}', finished_at = '2026-12-01T00:00:00.000Z' WHERE id = ?`,
    [finished.id],
  );
  assert.deepEqual(
    (await subject.row("SELECT input FROM memory_jobs WHERE id = ?", [finished.id])).input !== null,
    true,
  );
  await subject.row(subject.before0551, []);
  store = await subject.open();
  try {
    const kept = await store.getJob(tenant, finished.id);
    assert.equal(kept?.input, null);
    assert.deepEqual(kept?.result, { ok: 1 });
    assert.deepEqual((await store.getJob(tenant, waiting.id))?.input, waiting.input);
  } finally {
    await store.close();
  }
}

for (const make of [async () => sqliteSubject(), postgresSubject]) {
  describe("what a tenant holds beyond its counters (ADR 0551)", () => {
    it("bounds core blocks per tenant over every scope, in blocks and bytes", async () => {
      await checkBlockFlood(await make());
    });
    it("drops a finished import's input and keeps its outcome", async () => {
      await checkImportInputs(await make());
    });
    it("bounds the jobs waiting to run per tenant", async () => {
      await checkQueuedJobs(await make());
    });
    it("drops the inputs of jobs finished before the migration, keeps those waiting", async () => {
      await checkMigration(await make());
    });
  });
}
