/**
 * BM25 statistics are per scope: what one tenant (or another user of the same tenant) stores never
 * changes the scores another scope's search answers, on SQLite and on PostgreSQL.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createMemoryService, createSqliteStore, type MemoryService, type MemoryStore } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";

const aliceFacts = [
  "I adopted a golden retriever named Biscuit last spring",
  "My sister lives in Lisbon and teaches piano",
  "I am allergic to peanuts and shellfish",
  "I run five kilometres every morning before work",
  "My favourite tea is jasmine green tea",
  "I work as a pharmacist at a hospital in Denver",
  "Biscuit loves the dog park near the river",
  "I started learning Portuguese for my trip to Lisbon",
];
const queries = ["dog park", "sister piano Lisbon", "allergic peanuts", "morning run work", "tea"];

/** The other scopes' data: the same words many times over (changing their df) and long texts (avgdl). */
function noise(count: number): string[] {
  const texts: string[] = [];
  for (let index = 0; index < count; index += 1) {
    texts.push(
      index % 3 === 0
        ? `The dog park and the dog run and the tea room ${index}`
        : `A long note ${index} about Lisbon piano lessons, morning work meetings, peanuts, tea, and many other things that make this text much longer than usual`,
    );
  }
  return texts;
}

async function scores(service: MemoryService, tenantId: string, userId: string) {
  const answers: [string, string, number][] = [];
  for (const query of queries) {
    const { results } = await service.search(tenantId, { userId, query, limit: 10 });
    for (const result of results) answers.push([query, result.memory.content, result.score]);
  }
  return answers;
}

async function checkIsolation(store: MemoryStore, tag: string) {
  // A fixed clock, so recency is the same at every search.
  const at = new Date("2026-06-01T12:00:00Z");
  const service = createMemoryService({ store, resumeJobs: false, now: () => at });
  const tenantA = `stats-a-${tag}`;
  const tenantB = `stats-b-${tag}`;
  for (const content of aliceFacts) await service.add(tenantA, { userId: "alice", content, dedupe: false });
  const before = await scores(service, tenantA, "alice");
  assert.ok(before.length >= queries.length, "the searches found alice's facts");

  // Another tenant stores a lot with the same words.
  for (const content of noise(300)) await service.add(tenantB, { userId: "alice", content, dedupe: false });
  assert.deepEqual(await scores(service, tenantA, "alice"), before, "another tenant changed alice's scores");

  // Another user of the same tenant does too.
  for (const content of noise(150)) await service.add(tenantA, { userId: "bob", content, dedupe: false });
  assert.deepEqual(await scores(service, tenantA, "alice"), before, "bob changed alice's scores");

  // The statistics are live, not frozen: alice's own new memories do change her scores.
  for (const content of noise(20)) await service.add(tenantA, { userId: "alice", content, dedupe: false });
  assert.notDeepEqual(await scores(service, tenantA, "alice"), before, "alice's own data moved nothing");
  await service.close();
}

describe("per-scope BM25 statistics", () => {
  let directory: string | undefined;
  let database: TestDatabase | undefined;
  after(async () => {
    if (directory) rmSync(directory, { recursive: true, force: true });
    await database?.drop();
  });

  it("SQLite: another tenant's or user's data never changes a scope's scores", async () => {
    directory = mkdtempSync(join(tmpdir(), "tackle-memory-stats-"));
    await checkIsolation(createSqliteStore({ path: join(directory, "memory.db") }), "sqlite");
  });

  it("PostgreSQL: another tenant's or user's data never changes a scope's scores", async () => {
    database = await createTestDatabase("tackle_memory_stats");
    await checkIsolation(await createPostgresStore({ connectionString: database.url }), "postgres");
  });
});
