/**
 * Retention (ADR 0537) on a SQLite file and on PostgreSQL. A tenant's flood of searches — reads,
 * each recorded as a trace and as access records — leaves bounded rows and a file that stops
 * growing: the traces are cut to the tenant's newest, the access records are counts per day. Traces
 * and finished jobs past their age go, and then answer `not_found` like any missing id, while the
 * import job a memory's chain names stays.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import {
  createMemoryService,
  createSqliteStore,
  MemoryError,
  type MemoryRetentionOptions,
  type MemoryService,
  type MemoryStore,
} from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase, type TestDatabase, underLoadMs } from "@tackle/test-support";
import pg from "pg";

const dayMs = 86_400_000;

/** A store to open again and again, and its rows and bytes read from outside the service. */
interface Subject {
  open(): Promise<MemoryStore>;
  rows(table: "memory_traces" | "memory_access_log" | "memory_jobs", tenantId: string): Promise<number>;
  /** The SQLite file's size once its write-ahead log is checkpointed into it; PostgreSQL: undefined. */
  bytes(): Promise<number | undefined>;
}

function sqliteSubject(path: string): Subject {
  const read = <T>(body: (database: DatabaseSync) => T): T => {
    const database = new DatabaseSync(path);
    try {
      return body(database);
    } finally {
      database.close();
    }
  };
  return {
    open: async () => createSqliteStore({ path }),
    rows: async (table, tenantId) =>
      read((database) =>
        Number(
          (
            database.prepare(`SELECT count(*) AS n FROM ${table} WHERE tenant_id = ?`).get(tenantId) as {
              n: number;
            }
          ).n,
        ),
      ),
    bytes: async () => {
      read((database) => database.exec("PRAGMA wal_checkpoint(TRUNCATE)"));
      return statSync(path).size;
    },
  };
}

function postgresSubject(url: string): Subject {
  const query = async (sql: string, parameters: unknown[]) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return (await client.query(sql, parameters)).rows;
    } finally {
      await client.end();
    }
  };
  return {
    open: () => createPostgresStore({ connectionString: url }),
    rows: async (table, tenantId) =>
      (await query(`SELECT count(*)::int AS n FROM ${table} WHERE tenant_id = $1`, [tenantId]))[0].n,
    bytes: async () => undefined,
  };
}

/** A clock the test moves; the service reads it for every date it writes. */
function movableClock(start: string) {
  let at = Date.parse(start);
  return {
    now: () => new Date(at),
    advance: (ms: number) => {
      at += ms;
    },
  };
}

async function withService<T>(
  subject: Subject,
  options: { now: () => Date; retention?: MemoryRetentionOptions },
  body: (service: MemoryService) => Promise<T>,
): Promise<T> {
  const service = createMemoryService({ store: await subject.open(), ...options });
  try {
    return await body(service);
  } finally {
    // Closing waits for the deletions a search or job set off.
    await service.close();
  }
}

const places = ["Lisbon", "Porto", "Kyoto", "Oslo", "Quito", "Hanoi", "Dakar", "Lima"];
const things = ["tea", "trains", "jazz", "maps", "figs"];
const facts = Array.from(
  { length: 40 },
  (_, index) =>
    `Ada note ${index}: she likes ${things[index % things.length]} in ${places[index % places.length]}`,
);
const queries = places.flatMap((place) => things.map((thing) => `${thing} in ${place}`));

async function checkFlood(subject: Subject) {
  const tenantId = "flood";
  const scope = { userId: "ada" };
  const clock = movableClock("2026-03-01T00:00:00.000Z");
  const maxTracesPerTenant = 300;
  // One user alone may fill the tenant's room here: the tenant's cut is what this flood measures.
  const options = { now: clock.now, retention: { maxTracesPerTenant, maxTracesPerUser: maxTracesPerTenant } };
  const memoryIds = await withService(subject, options, async (service) => {
    const added = [];
    for (const content of facts) added.push((await service.add(tenantId, { ...scope, content })).memory.id);
    return added;
  });

  const perRound = 1_000;
  const readEvery = 10;
  const figures: { searches: number; traces: number; accessRows: number; bytes: number | undefined }[] = [];
  let hits = 0;
  for (let round = 1; round <= 3; round += 1) {
    // Each round a service of its own, as after a restart: the cuts do not depend on one process.
    await withService(subject, options, async (service) => {
      for (let index = 0; index < perRound; index += 1) {
        clock.advance(1_000);
        const answer = await service.search(tenantId, { ...scope, query: queries[index % queries.length]! });
        hits += answer.results.length;
        if (index % readEvery === 0) {
          await service.getMemory(tenantId, memoryIds[(index / readEvery) % memoryIds.length]!);
        }
      }
    });
    figures.push({
      searches: round * perRound,
      traces: await subject.rows("memory_traces", tenantId),
      accessRows: await subject.rows("memory_access_log", tenantId),
      bytes: await subject.bytes(),
    });
  }
  const [first, second, last] = figures as [(typeof figures)[0], (typeof figures)[0], (typeof figures)[0]];
  const message = JSON.stringify(figures);
  for (const figure of figures) {
    // The newest 300, and at most a tenth more between two cuts.
    assert.ok(figure.traces <= maxTracesPerTenant * 1.1, `traces past the bound: ${message}`);
    assert.ok(figure.traces >= maxTracesPerTenant, `the newest traces are kept: ${message}`);
    // One count per day for the searches, and one per memory hit and per memory read.
    assert.ok(figure.accessRows <= 1 + 2 * facts.length, `access rows past the bound: ${message}`);
  }
  assert.equal(last.accessRows, first.accessRows, `the same accesses on the same day add no row: ${message}`);
  // Once the cut is reached the deleted rows' pages are reused: the third thousand adds no page.
  if (second.bytes !== undefined && last.bytes !== undefined) {
    assert.ok(last.bytes <= second.bytes * 1.05, `the file kept growing: ${message}`);
  }

  // What the tenant reads back is whole: every search, hit and read is counted.
  await withService(subject, options, async (service) => {
    const { days } = await service.accessTrends(tenantId, { ...scope, days: 1 });
    assert.deepEqual(days, [
      { day: "2026-03-01", searches: 3 * perRound, hits, reads: (3 * perRound) / readEvery },
    ]);
    const { totals } = await service.accessSummaries(tenantId, scope);
    assert.equal(totals.searches, 3 * perRound);
    assert.equal((await service.status(tenantId)).counts.traces, last.traces);
  });
  return figures;
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

const isNotFound = (error: unknown) => {
  assert.ok(MemoryError.isInstance(error), String(error));
  assert.equal(error.code, "not_found");
  assert.equal(error.status, 404);
  return true;
};

async function checkExpiry(subject: Subject) {
  const tenantId = "aging";
  const scope = { userId: "ada", sessionId: "trip" };
  const clock = movableClock("2026-05-01T09:00:00.000Z");
  const options = {
    now: clock.now,
    retention: { maxFinishedJobsPerTenant: 5, maxFinishedJobsPerUser: 5 },
  };
  const transcript = {
    ...scope,
    format: "openai" as const,
    conversations: [
      {
        messages: [
          { role: "user", content: "I moved to Porto last year and I have a cat named Figo." },
          { role: "assistant", content: "Lovely, Porto is a fine city." },
        ],
      },
    ],
  };
  const first = await withService(subject, options, async (service) => {
    const imported = (await service.importConversations(tenantId, transcript)).job;
    assert.equal((await finished(service, tenantId, imported.id)).status, "succeeded");
    // The same transcript again stores nothing: no event names this job.
    const again = (await service.importConversations(tenantId, transcript)).job;
    assert.equal((await finished(service, tenantId, again.id)).status, "succeeded");
    const scans = [];
    for (let index = 0; index < 12; index += 1) {
      clock.advance(60_000);
      scans.push(
        (await service.noveltyScan(tenantId, { ...scope, candidates: [`Ada likes figs ${index}`] })).jobId,
      );
    }
    const { traceId } = await service.search(tenantId, { ...scope, query: "cat named Figo" });
    const memories = await service.listMemories(tenantId, { ...scope, limit: 50 });
    const fromImport = memories.memories.find((memory) => memory.provenance.importJobId === imported.id);
    assert.ok(fromImport, "the import made a memory that names it");
    return { imported: imported.id, again: again.id, scans, traceId, memoryId: fromImport.id };
  });

  await withService(subject, options, async (service) => {
    // The newest five scans are kept; older finished jobs past them are gone; the import that
    // stored events is not counted among them and stays.
    await assert.rejects(service.getJob(tenantId, first.again), isNotFound);
    for (const id of first.scans.slice(0, -5)) await assert.rejects(service.getJob(tenantId, id), isNotFound);
    for (const id of first.scans.slice(-5)) assert.equal((await service.getJob(tenantId, id)).job.id, id);
    assert.equal((await service.getTrace(tenantId, first.traceId)).trace.id, first.traceId);

    // A month and a day later: the next search sets off the sweep of expired records.
    clock.advance(31 * dayMs);
    await service.search(tenantId, { ...scope, query: "Porto" });
  });

  await withService(subject, options, async (service) => {
    await assert.rejects(service.getTrace(tenantId, first.traceId), isNotFound);
    for (const id of first.scans) await assert.rejects(service.getJob(tenantId, id), isNotFound);
    const { traces } = await service.listTraces(tenantId, { ...scope });
    assert.deepEqual(
      traces.map((trace) => trace.query),
      ["Porto"],
    );
    // The import job is the provenance of the memories and events it stored: its chain still names it.
    assert.equal((await service.getJob(tenantId, first.imported)).job.id, first.imported);
    const chain = await service.chainTrace(tenantId, first.memoryId);
    assert.equal(chain.importJob?.id, first.imported);
    assert.ok(chain.events.length > 0);
    const { jobs } = await service.listJobs(tenantId, { ...scope });
    assert.deepEqual(
      jobs.map((job) => job.id),
      [first.imported],
    );
  });
  assert.equal(await subject.rows("memory_jobs", tenantId), 1);
}

describe("retention: a SQLite file", () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-retention-"));
  after(() => rmSync(directory, { recursive: true, force: true }));

  it("3,000 searches leave at most the newest traces and a count per day, and the file stops growing", async (context) => {
    const figures = await checkFlood(sqliteSubject(join(directory, "flood.db")));
    context.diagnostic(JSON.stringify(figures));
  });

  it("expired traces and jobs answer not_found; an import job a memory names stays", async () => {
    await checkExpiry(sqliteSubject(join(directory, "expiry.db")));
  });

  it("refuses a limit that is not a whole number of at least 1", async () => {
    const store = createSqliteStore({ path: join(directory, "options.db") });
    try {
      assert.throws(
        () => createMemoryService({ store, retention: { traceRetentionDays: 0 } }),
        /traceRetentionDays must be a whole number of at least 1/,
      );
    } finally {
      await store.close();
    }
  });
});

describe("retention: PostgreSQL", () => {
  const databases: TestDatabase[] = [];
  after(async () => {
    for (const database of databases) await database.drop();
  });
  const subject = async () => {
    const database = await createTestDatabase("tackle_memory_retention");
    databases.push(database);
    return postgresSubject(database.url);
  };

  it("3,000 searches leave at most the newest traces and a count per day", async (context) => {
    const figures = await checkFlood(await subject());
    context.diagnostic(JSON.stringify(figures));
  });

  it("expired traces and jobs answer not_found; an import job a memory names stays", async () => {
    await checkExpiry(await subject());
  });
});
