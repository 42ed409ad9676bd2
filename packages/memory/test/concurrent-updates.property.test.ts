/**
 * Concurrent writes to one memory as a property against an oracle, on each store: random plans of
 * reads, searches, updates (with and without `expectedVersion`) and feedback, all started at once on a
 * few memories, must leave each memory exactly as the operations that answered success say — every
 * read and search hit counted once in `accessCount`, every feedback in its count, one version per
 * change with a contiguous history, the content one that an update answered — and every refused
 * operation (`conflict`) leaves nothing. A search's hits and a read count accesses outside the
 * memory's version; an update had rewritten them from what it read, losing the ones in between.
 *
 * `TACKLE_PROPERTY_ROUNDS` sets the rounds (default 150 on a SQLite file, 60 on PostgreSQL), from
 * seed `TACKLE_PROPERTY_SEED` (default 11).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createMemoryService, createSqliteStore, MemoryError, type MemoryService } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase, seededRandom, type TestDatabase } from "@tackle/test-support";

const rounds = (fallback: number) => Number(process.env.TACKLE_PROPERTY_ROUNDS ?? fallback);
const seed = Number(process.env.TACKLE_PROPERTY_SEED ?? 11);
const userId = "u1";

type Operation =
  | { op: "get"; target: number }
  | { op: "search" }
  | { op: "update"; target: number; content: string; expectedVersion?: number }
  | { op: "feedback"; target: number; rating: "helpful" | "unhelpful" };

/** What the operations that answered success say each memory must hold. */
interface Expected {
  accesses: number;
  helpful: number;
  unhelpful: number;
  changes: number;
  contents: Set<string>;
}

interface Counters {
  operations: number;
  conflicts: number;
  searchHits: number;
  /** Rounds where an update and an access were in flight on one memory at once. */
  overlapping: number;
}

function plan(random: () => number, round: number, memories: number): Operation[] {
  const length = 6 + Math.floor(random() * 20);
  return Array.from({ length }, (_, index): Operation => {
    const target = Math.floor(random() * memories);
    const roll = random();
    if (roll < 0.25) return { op: "get", target };
    if (roll < 0.45) return { op: "search" };
    if (roll < 0.75) {
      const content = `note ${round}-${index} revised text for memory ${target}`;
      return random() < 0.35
        ? { op: "update", target, content, expectedVersion: 1 + Math.floor(random() * 3) }
        : { op: "update", target, content };
    }
    return { op: "feedback", target, rating: random() < 0.6 ? "helpful" : "unhelpful" };
  });
}

async function runRound(
  service: MemoryService,
  random: () => number,
  round: number,
  counters: Counters,
): Promise<void> {
  const tenantId = `tenant-${round}-${random().toString(36).slice(2)}`;
  const ids: string[] = [];
  const expected: Expected[] = [];
  for (let index = 0; index < 3; index += 1) {
    const content = `note ${round} first text for memory ${index}`;
    const { memory } = await service.add(tenantId, { userId, content, kind: "fact" });
    ids.push(memory.id);
    expected.push({ accesses: 0, helpful: 0, unhelpful: 0, changes: 0, contents: new Set([content]) });
  }
  const operations = plan(random, round, ids.length);
  const touched = new Set(operations.flatMap((op) => (op.op === "update" ? [op.target] : [])));
  if (operations.some((op) => op.op === "search" || (op.op === "get" && touched.has(op.target))))
    counters.overlapping += 1;
  await Promise.all(
    operations.map(async (operation) => {
      counters.operations += 1;
      try {
        await apply(service, tenantId, ids, expected, operation, counters);
      } catch (error) {
        if (operation.op === "update" && operation.expectedVersion !== undefined) {
          assert.ok(MemoryError.isInstance(error) && error.code === "conflict", String(error));
          counters.conflicts += 1;
          return;
        }
        throw error;
      }
    }),
  );
  for (const [index, id] of ids.entries()) await checkMemory(service, tenantId, id, expected[index]!);
}

async function apply(
  service: MemoryService,
  tenantId: string,
  ids: readonly string[],
  expected: Expected[],
  operation: Operation,
  counters: Counters,
): Promise<void> {
  switch (operation.op) {
    case "get": {
      await service.getMemory(tenantId, ids[operation.target]!, { userId });
      expected[operation.target]!.accesses += 1;
      return;
    }
    case "search": {
      const { results } = await service.search(tenantId, { userId, query: "note memory", limit: 10 });
      for (const result of results) {
        const index = ids.indexOf(result.memory.id);
        assert.ok(index >= 0, "a search answered a memory of no plan");
        expected[index]!.accesses += 1;
        counters.searchHits += 1;
      }
      return;
    }
    case "update": {
      const { content, expectedVersion } = operation;
      await service.updateMemory(
        tenantId,
        ids[operation.target]!,
        { content, ...(expectedVersion === undefined ? {} : { expectedVersion }) },
        { userId },
      );
      expected[operation.target]!.changes += 1;
      expected[operation.target]!.contents.add(content);
      return;
    }
    case "feedback": {
      await service.recordFeedback(
        tenantId,
        ids[operation.target]!,
        { rating: operation.rating },
        { userId },
      );
      expected[operation.target]![operation.rating] += 1;
      expected[operation.target]!.changes += 1;
      return;
    }
  }
}

async function checkMemory(service: MemoryService, tenantId: string, id: string, expected: Expected) {
  // The read answers the memory as it stood before this read's own access is counted.
  const { memory } = await service.getMemory(tenantId, id, { userId });
  assert.equal(memory.accessCount, expected.accesses, `${id}: reads and search hits counted`);
  assert.deepEqual(memory.feedback, { helpful: expected.helpful, unhelpful: expected.unhelpful });
  assert.equal(memory.version, 1 + expected.changes, `${id}: one version per change that answered`);
  assert.ok(expected.contents.has(memory.content), `${id}: content "${memory.content}" no update answered`);
  const { versions } = await service.memoryHistory(tenantId, id, { userId });
  assert.deepEqual(
    versions.map((version) => version.version).sort((left, right) => left - right),
    Array.from({ length: memory.version }, (_, index) => index + 1),
    `${id}: a contiguous history`,
  );
  const updates = versions.filter((version) => version.change === "update").map((version) => version.content);
  assert.equal(new Set(updates).size, updates.length, `${id}: an update recorded twice`);
  for (const content of updates)
    assert.ok(expected.contents.has(content ?? ""), `${id}: an update no call made`);
}

async function runProperty(service: MemoryService, count: number): Promise<Counters> {
  const random = seededRandom(seed);
  const counters: Counters = { operations: 0, conflicts: 0, searchHits: 0, overlapping: 0 };
  for (let round = 1; round <= count; round += 1) {
    try {
      await runRound(service, random, round, counters);
    } catch (error) {
      throw new Error(`round ${round} of seed ${seed} failed`, { cause: error });
    }
  }
  // Not vacuous: updates were refused and accepted, searches hit, accesses raced updates.
  assert.ok(counters.conflicts > 0 && counters.searchHits > count, JSON.stringify(counters));
  assert.ok(counters.overlapping > count / 2, JSON.stringify(counters));
  return counters;
}

describe("concurrent writes to a memory (property against an oracle)", () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-concurrent-"));
  let database: TestDatabase | undefined;
  const services: MemoryService[] = [];
  after(async () => {
    for (const service of services) await service.close();
    await database?.drop();
    rmSync(directory, { recursive: true, force: true });
  });

  it("SQLite file: every access, feedback and change that answered is kept, and only those", async () => {
    const service = createMemoryService({ store: createSqliteStore({ path: join(directory, "writes.db") }) });
    services.push(service);
    const counters = await runProperty(service, rounds(150));
    console.log(`SQLite: ${JSON.stringify(counters)}`);
  });

  it("PostgreSQL: every access, feedback and change that answered is kept, and only those", async () => {
    database = await createTestDatabase("tackle_memory_concurrent");
    const service = createMemoryService({
      store: await createPostgresStore({ connectionString: database.url }),
    });
    services.push(service);
    const counters = await runProperty(service, Math.ceil(rounds(150) * 0.4));
    console.log(`PostgreSQL: ${JSON.stringify(counters)}`);
  });
});
