/**
 * Retention per user (ADR 0545) against an oracle, on a SQLite file and on PostgreSQL. Each case is
 * a tenant with small random limits and a random run of traces and jobs by a few users (and rows that
 * name no user) over a clock that moves hours at a time; finished jobs, jobs still queued, and import
 * jobs that an event names. After every row, the service's retention (`createRetention`, over the real
 * store) cuts and sweeps, and the rows kept must be exactly the oracle's: of the unexpired rows that
 * may go, each user's newest within its limit, and of those the tenant's newest within its own; every
 * other job stays.
 *
 * A retention of its own for each row, closed after it: closing waits for its cuts and its sweep, and
 * with limits of at most 10 a retention cuts after every row, as the service's does all its life.
 *
 * `TACKLE_PROPERTY_ROUNDS` sets the cases (default 3,000 on a SQLite file, 100 on PostgreSQL), from
 * seed `TACKLE_PROPERTY_SEED` (default 29).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, describe, it } from "node:test";
import { silentLogger } from "@tackle/core";
import { createSqliteStore, type MemoryStore } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase, seededRandom, type TestDatabase } from "@tackle/test-support";
import pg from "pg";
import { createRetention, type MemoryRetentionOptions } from "../src/service/retention.ts";

const rounds = (fallback: number) => Number(process.env.TACKLE_PROPERTY_ROUNDS ?? fallback);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 29);
const hourMs = 3_600_000;
const dayMs = 24 * hourMs;
const users = ["u1", "u2", "u3", undefined] as const;

/** What the oracle knows of a row: whose, when, and whether retention may delete it. */
interface Row {
  readonly kind: "trace" | "job";
  readonly id: string;
  readonly userId: string | undefined;
  readonly at: number;
  /** A finished job that no event names, or any trace. */
  readonly deletable: boolean;
}

/** The ids the oracle keeps of one kind: the cuts and the sweep as ADRs 0537 and 0545 state them. */
function oracle(rows: readonly Row[], now: number, limits: { user: number; tenant: number; days: number }) {
  const cutoff = now - limits.days * dayMs;
  const perUser = new Map<string | undefined, number>();
  const survivors: Row[] = [];
  for (const row of [...rows].reverse()) {
    if (!row.deletable || row.at < cutoff) continue;
    const held = perUser.get(row.userId) ?? 0;
    if (held >= limits.user) continue;
    perUser.set(row.userId, held + 1);
    survivors.push(row);
  }
  const kept = new Set(survivors.slice(0, limits.tenant).map((row) => row.id));
  return rows.filter((row) => !row.deletable || kept.has(row.id)).map((row) => row.id);
}

interface Subject {
  open(): Promise<MemoryStore>;
  /** The tenant's trace ids and job ids, in write order, read from outside the store. */
  kept(tenantId: string): Promise<{ traces: string[]; jobs: string[] }>;
  close(): Promise<void>;
}

async function runCase(store: MemoryStore, subject: Subject, random: () => number, index: number) {
  const tenantId = `case-${index}`;
  const pick = (from: number, to: number) => from + Math.floor(random() * (to - from + 1));
  const traceLimits = { user: pick(1, 4), tenant: 0, days: pick(1, 3) };
  traceLimits.tenant = pick(traceLimits.user, 8);
  const jobLimits = { user: pick(1, 3), tenant: 0, days: pick(1, 3) };
  jobLimits.tenant = pick(jobLimits.user, 6);
  const options: MemoryRetentionOptions = {
    maxTracesPerUser: traceLimits.user,
    maxTracesPerTenant: traceLimits.tenant,
    traceRetentionDays: traceLimits.days,
    maxFinishedJobsPerUser: jobLimits.user,
    maxFinishedJobsPerTenant: jobLimits.tenant,
    jobRetentionDays: jobLimits.days,
  };
  let now = Date.parse("2026-04-01T00:00:00.000Z");
  const rows: Row[] = [];
  const steps = pick(8, 24);
  for (let step = 0; step < steps; step += 1) {
    now += Math.floor(random() * 14 * hourMs);
    const at = new Date(now).toISOString();
    const userId = users[pick(0, users.length - 1)];
    const id = `${tenantId}-${step}`;
    const roll = random();
    if (roll < 0.55) {
      await store.insertTrace(
        {
          id,
          tenantId,
          ...(userId ? { userId } : {}),
          operation: "search",
          query: `query ${step}`,
          ranking: "bm25",
          results: [],
          durationMs: 1,
          createdAt: at,
        },
        [],
      );
      rows.push({ kind: "trace", id, userId, at: now, deletable: true });
    } else {
      // A finished scan; now and then a job still queued, or an import that stored an event.
      const shape = roll < 0.85 ? "finished" : roll < 0.93 ? "queued" : "import";
      await store.insertJob({
        id,
        tenantId,
        ...(userId ? { userId } : {}),
        type: shape === "import" ? "import" : "novelty_scan",
        status: shape === "queued" ? "queued" : "succeeded",
        input: {},
        createdAt: at,
        ...(shape === "queued" ? {} : { result: {}, startedAt: at, finishedAt: at }),
      });
      if (shape === "import") {
        await store.appendEvent({
          id: `${id}-event`,
          tenantId,
          ...(userId ? { userId } : {}),
          role: "user",
          content: `turn ${step}`,
          metadata: {},
          source: "import",
          importJobId: id,
          occurredAt: at,
          createdAt: at,
        });
      }
      rows.push({ kind: "job", id, userId, at: now, deletable: shape === "finished" });
    }
    const retention = createRetention(store, options, () => new Date(now), silentLogger);
    const kind = rows.at(-1)!.kind;
    if (kind === "trace") retention.traceRecorded(tenantId, userId);
    else retention.jobRecorded(tenantId, userId);
    await retention.close();
    const expected = {
      traces: oracle(
        rows.filter((row) => row.kind === "trace"),
        now,
        traceLimits,
      ),
      jobs: oracle(
        rows.filter((row) => row.kind === "job"),
        now,
        jobLimits,
      ),
    };
    assert.deepEqual(
      await subject.kept(tenantId),
      expected,
      `step ${step} of ${JSON.stringify({ options, rows })}`,
    );
  }
  return steps;
}

async function property(subject: Subject, count: number) {
  const store = await subject.open();
  const random = seededRandom(seed);
  let steps = 0;
  try {
    for (let index = 0; index < count; index += 1) {
      try {
        steps += await runCase(store, subject, random, index);
      } catch (error) {
        throw new Error(`case ${index} of seed ${seed} failed`, { cause: error });
      }
    }
  } finally {
    await store.close();
    await subject.close();
  }
  return steps;
}

describe("retention per user against an oracle: a SQLite file", () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-retention-property-"));
  after(() => rmSync(directory, { recursive: true, force: true }));

  it("keeps exactly each user's newest, within the tenant's newest, within the days", async (context) => {
    const path = join(directory, "property.db");
    let reader: DatabaseSync | undefined;
    const ids = (table: string, tenantId: string) =>
      (
        reader!.prepare(`SELECT id FROM ${table} WHERE tenant_id = ? ORDER BY seq`).all(tenantId) as {
          id: string;
        }[]
      ).map((row) => row.id);
    const subject: Subject = {
      open: async () => {
        const store = createSqliteStore({ path });
        reader = new DatabaseSync(path);
        return store;
      },
      kept: async (tenantId) => ({
        traces: ids("memory_traces", tenantId),
        jobs: ids("memory_jobs", tenantId),
      }),
      close: async () => reader?.close(),
    };
    const cases = rounds(3_000);
    const steps = await property(subject, cases);
    context.diagnostic(`${cases} cases, ${steps} rows, each followed by a check`);
  });
});

describe("retention per user against an oracle: PostgreSQL", () => {
  const databases: TestDatabase[] = [];
  after(async () => {
    for (const database of databases) await database.drop();
  });

  it("keeps exactly each user's newest, within the tenant's newest, within the days", async (context) => {
    const database = await createTestDatabase("tackle_memory_retention_property");
    databases.push(database);
    const reader = new pg.Client({ connectionString: database.url });
    const ids = async (table: string, tenantId: string) =>
      (await reader.query(`SELECT id FROM ${table} WHERE tenant_id = $1 ORDER BY seq`, [tenantId])).rows.map(
        (row: { id: string }) => row.id,
      );
    const subject: Subject = {
      open: async () => {
        await reader.connect();
        return createPostgresStore({ connectionString: database.url });
      },
      kept: async (tenantId) => ({
        traces: await ids("memory_traces", tenantId),
        jobs: await ids("memory_jobs", tenantId),
      }),
      close: () => reader.end(),
    };
    const cases = rounds(100);
    const steps = await property(subject, cases);
    context.diagnostic(`${cases} cases, ${steps} rows, each followed by a check`);
  });
});
