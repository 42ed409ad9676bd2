/**
 * Access counts against the row-per-access log they replaced (ADR 0537), as a property on a SQLite
 * file and on PostgreSQL. Random searches, context bundles, knowledge searches and reads in several
 * scopes, over days and months of a moving clock, are also written to an oracle: a row per search,
 * per hit and per read, as the stores kept them before. Then `accessTrends` for every scope filter
 * and window, and the `searches` total of `accessSummaries`, answer what the oracle's rows count
 * within the days kept (365 by default, or 30).
 *
 * `TACKLE_PROPERTY_ROUNDS` sets the rounds (default 12 on a SQLite file, 6 on PostgreSQL), from
 * seed `TACKLE_PROPERTY_SEED` (default 17).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import {
  createMemoryService,
  createSqliteStore,
  type MemoryScope,
  type MemoryService,
  type MemoryStore,
} from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase, seededRandom, type TestDatabase } from "@tackle/test-support";

const rounds = (fallback: number) => Number(process.env.TACKLE_PROPERTY_ROUNDS ?? fallback);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 17);
const dayMs = 86_400_000;

/** One row of the old log: what a search, a hit or a read wrote. */
interface OracleRow {
  readonly kind: "search" | "hit" | "read";
  readonly scope: MemoryScope;
  readonly day: string;
}

const scopes: MemoryScope[] = [
  { userId: "u1" },
  { userId: "u1", sessionId: "s1" },
  { userId: "u1", agentId: "a1", sessionId: "s2" },
  { userId: "u2", agentId: "a1" },
  { userId: "u2", sessionId: "s1" },
];
/** The filters a caller may ask trends and summaries for: the whole tenant, and each field's values. */
const filters: MemoryScope[] = [
  {},
  { userId: "u1" },
  { userId: "u2" },
  { agentId: "a1" },
  { sessionId: "s1" },
  { sessionId: "s2" },
  { userId: "u1", sessionId: "s1" },
  { userId: "u2", agentId: "a1" },
  { userId: "u1", agentId: "a1", sessionId: "s2" },
];
const words = ["tea", "garden", "river", "train", "violin", "lemon"];

const inside = (filter: MemoryScope, scope: MemoryScope) =>
  (["userId", "agentId", "sessionId"] as const).every(
    (field) => filter[field] === undefined || filter[field] === scope[field],
  );

/** `accessTrends` as the old log answered it: per day from `since`, a zero row for a quiet day. */
function oracleTrends(
  rows: readonly OracleRow[],
  filter: MemoryScope,
  today: Date,
  days: number,
  keptFrom: string,
) {
  const answer = [];
  for (let offset = days - 1; offset >= 0; offset -= 1) {
    const day = new Date(today.getTime() - offset * dayMs).toISOString().slice(0, 10);
    const counted = day < keptFrom ? [] : rows.filter((row) => row.day === day && inside(filter, row.scope));
    answer.push({
      day,
      searches: counted.filter((row) => row.kind === "search").length,
      hits: counted.filter((row) => row.kind === "hit").length,
      reads: counted.filter((row) => row.kind === "read").length,
    });
  }
  return answer;
}

async function runRound(open: () => Promise<MemoryStore>, random: () => number, round: number) {
  const tenantId = `trends-${seed}-${round}`;
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  let at = Date.parse("2026-01-01T08:00:00.000Z") + Math.floor(random() * 200) * dayMs;
  const now = () => new Date(at);
  const accessRetentionDays = random() < 0.3 ? 30 : 365;
  const options = { now, retention: { accessRetentionDays } };
  const rows: OracleRow[] = [];
  const dayOf = () => new Date(at).toISOString().slice(0, 10);
  const record = (kind: OracleRow["kind"], scope: MemoryScope, count = 1) => {
    for (let index = 0; index < count; index += 1) rows.push({ kind, scope, day: dayOf() });
  };

  let service: MemoryService = createMemoryService({ store: await open(), ...options });
  try {
    const memories: { id: string; scope: MemoryScope }[] = [];
    for (const scope of scopes) {
      for (let index = 0; index < 3; index += 1) {
        const content = `${pick(words)} ${pick(words)} ${pick(words)} note ${index}`;
        const { memory } = await service.add(tenantId, { ...scope, content, dedupe: false });
        memories.push({ id: memory.id, scope });
      }
    }
    await service.ingestDocument(tenantId, { ...scopes[0]!, title: "Words", content: words.join(" ") });
    const operations = 40 + Math.floor(random() * 40);
    for (let step = 0; step < operations; step += 1) {
      const choice = random();
      const scope = pick(scopes);
      const query = `${pick(words)} ${pick(words)}`;
      if (choice < 0.4) {
        const { results } = await service.search(tenantId, { ...scope, query });
        record("search", scope);
        for (const _ of results) record("hit", scope);
      } else if (choice < 0.55) {
        const bundle = await service.contextBundle(tenantId, { ...scope, query, tokenBudget: 400 });
        record("search", scope);
        for (const _ of bundle.memories) record("hit", scope);
      } else if (choice < 0.65) {
        await service.searchKnowledge(tenantId, { ...scope, query });
        record("search", scope);
      } else if (choice < 0.85) {
        const memory = pick(memories);
        await service.getMemory(tenantId, memory.id);
        // A read counts in the memory's own scope.
        record("read", memory.scope);
      } else {
        // Hours to three months: rounds span past a year, so the oldest days are swept.
        at += random() < 0.5 ? Math.floor(random() * 20) * 3_600_000 : Math.floor(random() * 90) * dayMs;
      }
    }
    // Mostly to a day when one of the days counted is the oldest kept or the newest swept (the edges
    // of the sweep), at least two hours on; one more search sets off the sweep, and closing waits for it.
    const edge = rows.length > 0 && random() < 0.7 ? Date.parse(pick(rows).day) : Number.NaN;
    const kept = accessRetentionDays - (random() < 0.5 ? 1 : 0);
    const target = edge + kept * dayMs + Math.floor(random() * 24) * 3_600_000;
    at = Number.isFinite(target) && target > at + 2 * 3_600_000 ? target : at + 2 * 3_600_000;
    const last = await service.search(tenantId, { userId: "u1", query: "tea" });
    record("search", { userId: "u1" });
    record("hit", { userId: "u1" }, last.results.length);
  } finally {
    await service.close();
  }

  const keptFrom = new Date(at - (accessRetentionDays - 1) * dayMs).toISOString().slice(0, 10);
  service = createMemoryService({ store: await open(), ...options });
  try {
    for (const filter of filters) {
      for (const days of [1, 7, 30, 90, 365, 1 + Math.floor(random() * 365)]) {
        const { days: answered } = await service.accessTrends(tenantId, { ...filter, days });
        assert.deepEqual(
          answered,
          oracleTrends(rows, filter, now(), days, keptFrom),
          `trends of ${JSON.stringify(filter)} over ${days} days (kept from ${keptFrom})`,
        );
      }
      const { totals } = await service.accessSummaries(tenantId, filter);
      const searches = rows.filter(
        (row) => row.kind === "search" && row.day >= keptFrom && inside(filter, row.scope),
      ).length;
      assert.equal(totals.searches, searches, `searches of ${JSON.stringify(filter)} kept from ${keptFrom}`);
    }
  } finally {
    await service.close();
  }
  return rows.length;
}

async function property(open: () => Promise<MemoryStore>, count: number) {
  const random = seededRandom(seed);
  let accesses = 0;
  for (let round = 0; round < count; round += 1) {
    try {
      accesses += await runRound(open, random, round);
    } catch (error) {
      throw new Error(`round ${round} of seed ${seed} failed`, { cause: error });
    }
  }
  return accesses;
}

describe("access counts answer what a row per access answered", () => {
  let directory: string | undefined;
  let database: TestDatabase | undefined;
  after(async () => {
    if (directory) rmSync(directory, { recursive: true, force: true });
    await database?.drop();
  });

  it("on a SQLite file", async (context) => {
    directory = mkdtempSync(join(tmpdir(), "tackle-memory-trends-"));
    const path = join(directory, "memory.db");
    const accesses = await property(async () => createSqliteStore({ path }), rounds(12));
    context.diagnostic(`${accesses} accesses checked`);
  });

  it("on PostgreSQL", async (context) => {
    database = await createTestDatabase("tackle_memory_trends");
    const url = database.url;
    const accesses = await property(() => createPostgresStore({ connectionString: url }), rounds(6));
    context.diagnostic(`${accesses} accesses checked`);
  });
});
