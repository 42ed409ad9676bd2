/**
 * Search latency at 10k and 100k memories on SQLite (FTS5) and PostgreSQL (tsvector + GIN).
 * Memories are bulk-loaded with batched multi-row INSERTs (1000 rows a batch, same columns the store
 * writes, no history rows) because one transaction per memory would not build 100k on PostgreSQL
 * within the bench's 3-minute budget on this 2-core machine. Then seeded two-word queries run:
 *   - `service.search`: the full operation (BM25, recency, feedback, trace + access-log writes),
 *   - `store.searchMemories`: the scoped BM25 query alone,
 *   - raw baseline: the same full-text query with no tenant or scope filter (what scoping costs),
 *   - `service.add`: one write through the real path (novelty check, insert, history row), for scale.
 *   node_modules/.bin/node --conditions=@tackle/source bench/memory/search-latency.ts [--queries=300] [--sizes=10000,100000]
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync, type SQLInputValue } from "node:sqlite";
import { createMemoryService, createSqliteStore, type MemoryStore } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase } from "@tackle/test-support";
import pg from "pg";
import { scopeKey } from "../../packages/memory/src/scope/memory-scope.ts";
import { contentHash, queryTerms } from "../../packages/memory/src/service/text.ts";
import type { StoredMemory } from "../../packages/memory/src/store/memory-store.ts";
import { memoryColumns, memoryValues } from "../../packages/memory/src/store/row-codec.ts";
import { scopeTokens } from "../../packages/memory/src/store/sqlite/scope-tokens.ts";

const argument = (name: string, fallback: string) =>
  process.argv.find((item) => item.startsWith(`--${name}=`))?.split("=")[1] ?? fallback;
const queryCount = Number(argument("queries", "300"));
const sizes = argument("sizes", "10000,100000").split(",").map(Number);
const tenants = 20;
const usersPerTenant = 50;
const batchSize = 1000;

function mulberry32(seed: number) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4294967296;
  };
}

// A Zipf-distributed synthetic vocabulary, so posting lists look like natural language.
const random = mulberry32(42);
const syllables = [
  "ka",
  "lo",
  "mi",
  "ne",
  "ru",
  "ta",
  "vo",
  "shi",
  "pa",
  "den",
  "mar",
  "tel",
  "bro",
  "qui",
  "zen",
];
const vocabulary = Array.from({ length: 4000 }, (_, index) => {
  let word = "";
  let value = index + 7;
  while (word.length < 5 || value > 0) {
    word += syllables[value % syllables.length];
    value = Math.floor(value / syllables.length);
  }
  return word;
});
const zipfWeights = vocabulary.map((_, index) => 1 / (index + 1));
const zipfTotal = zipfWeights.reduce((sum, weight) => sum + weight, 0);
function zipfWord(): string {
  let target = random() * zipfTotal;
  for (let index = 0; index < vocabulary.length; index += 1) {
    target -= zipfWeights[index]!;
    if (target <= 0) return vocabulary[index]!;
  }
  return vocabulary.at(-1)!;
}

function makeMemory(index: number): StoredMemory {
  const words = Array.from({ length: 8 + Math.floor(random() * 12) }, zipfWord);
  const content = `${words.join(" ")} ${index}`;
  const at = new Date(Date.UTC(2026, 0, 1) + index * 1000).toISOString();
  const id = randomUUID();
  return {
    id,
    tenantId: `tenant-${index % tenants}`,
    userId: `user-${Math.floor(index / tenants) % usersPerTenant}`,
    kind: "fact",
    content,
    metadata: {},
    provenance: { source: "api", eventIds: [], derivedFrom: [] },
    version: 1,
    status: "active",
    importance: 0.5,
    feedback: { helpful: 0, unhelpful: 0 },
    outcomes: { successes: 0, failures: 0 },
    accessCount: 0,
    createdAt: at,
    updatedAt: at,
    dedupeKey: contentHash(content),
  };
}

async function loadSqlite(path: string, from: number, to: number) {
  const database = new DatabaseSync(path);
  database.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
  for (let start = from; start < to; start += batchSize) {
    const rows = Array.from({ length: Math.min(batchSize, to - start) }, (_, offset) =>
      makeMemory(start + offset),
    );
    const columns = [...memoryColumns, "scope_tokens"];
    const placeholders = rows.map(() => `(${columns.map(() => "?").join(", ")})`).join(", ");
    database.exec("BEGIN");
    database
      .prepare(`INSERT INTO memory_memories (${columns.join(", ")}) VALUES ${placeholders}`)
      .run(
        ...(rows.flatMap((row) => [
          ...memoryValues(row, scopeKey(row)),
          scopeTokens(row.tenantId, row).join(" "),
        ]) as SQLInputValue[]),
      );
    database.exec("COMMIT");
  }
  database.close();
}

async function loadPostgres(url: string, from: number, to: number) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  for (let start = from; start < to; start += batchSize) {
    const rows = Array.from({ length: Math.min(batchSize, to - start) }, (_, offset) =>
      makeMemory(start + offset),
    );
    let parameter = 0;
    const placeholders = rows
      .map(() => `(${memoryColumns.map(() => `$${++parameter}`).join(", ")})`)
      .join(", ");
    await client.query(
      `INSERT INTO memory_memories (${memoryColumns.join(", ")}) VALUES ${placeholders}`,
      rows.flatMap((row) => memoryValues(row, scopeKey(row))),
    );
  }
  await client.query("ANALYZE memory_memories");
  await client.end();
}

function percentile(samples: number[], fraction: number): number {
  const sorted = [...samples].sort((left, right) => left - right);
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!;
}

async function time(run: () => Promise<unknown>): Promise<number[]> {
  for (let warm = 0; warm < 20; warm += 1) await run();
  const samples: number[] = [];
  for (let index = 0; index < queryCount; index += 1) {
    const started = performance.now();
    await run();
    samples.push(performance.now() - started);
  }
  return samples;
}

interface Row {
  store: string;
  size: number;
  path: string;
  samples: number[];
  build: number;
}

const queryRandom = mulberry32(7);
const queries = Array.from({ length: queryCount + 20 }, () => {
  const pickRank = () => vocabulary[Math.floor(queryRandom() * 600)]!;
  return {
    text: `${pickRank()} ${pickRank()}`,
    tenant: `tenant-${Math.floor(queryRandom() * tenants)}`,
    user: `user-${Math.floor(queryRandom() * usersPerTenant)}`,
  };
});

async function measure(
  storeName: string,
  size: number,
  build: number,
  store: MemoryStore,
  raw: (terms: string[]) => Promise<unknown>,
): Promise<Row[]> {
  const service = createMemoryService({ store, resumeJobs: false });
  let cursor = 0;
  const next = () => queries[cursor++ % queries.length]!;
  const rows: Row[] = [];
  rows.push({
    store: storeName,
    size,
    build,
    path: "service.search (tenant + user scope)",
    samples: await time(() => {
      const query = next();
      return service.search(query.tenant, { userId: query.user, query: query.text, limit: 10 });
    }),
  });
  rows.push({
    store: storeName,
    size,
    build,
    path: "store.searchMemories (tenant + user scope)",
    samples: await time(() => {
      const query = next();
      return store.searchMemories(query.tenant, { userId: query.user }, queryTerms(query.text), {
        limit: 50,
      });
    }),
  });
  let added = 0;
  rows.push({
    store: storeName,
    size,
    build,
    path: "service.add (novelty check, insert, history)",
    samples: await time(() => {
      const query = next();
      added += 1;
      return service.add(query.tenant, {
        userId: query.user,
        content: `${query.text} added fact number ${size + added}`,
      });
    }),
  });
  rows.push({
    store: storeName,
    size,
    build,
    path: "raw baseline: unscoped full-text query",
    samples: await time(() => raw(queryTerms(next().text))),
  });
  return rows;
}

const results: Row[] = [];
const directory = mkdtempSync(join(tmpdir(), "tackle-memory-bench-"));
try {
  // SQLite: one file grows from 10k to 100k, measured at each size.
  const sqlitePath = join(directory, "bench.db");
  createSqliteStore({ path: sqlitePath }).close();
  let loaded = 0;
  for (const size of sizes) {
    const started = performance.now();
    await loadSqlite(sqlitePath, loaded, size);
    const build = (performance.now() - started) / 1000;
    loaded = size;
    const store = createSqliteStore({ path: sqlitePath });
    const rawDatabase = new DatabaseSync(sqlitePath);
    const rawQuery = rawDatabase.prepare(
      "SELECT m.id, -bm25(memory_memories_search, 1.0, 0.0) AS score FROM memory_memories_search JOIN memory_memories m ON m.seq = memory_memories_search.rowid WHERE memory_memories_search MATCH ? ORDER BY bm25(memory_memories_search, 1.0, 0.0) LIMIT 50",
    );
    results.push(
      ...(await measure("SQLite", size, build, store, async (terms) =>
        rawQuery.all(`content : (${terms.map((term) => `"${term}"`).join(" OR ")})`),
      )),
    );
    rawDatabase.close();
    await store.close();
  }

  const database = await createTestDatabase("tackle_memory_bench");
  try {
    await (await createPostgresStore({ connectionString: database.url })).close();
    loaded = 0;
    for (const size of sizes) {
      const started = performance.now();
      await loadPostgres(database.url, loaded, size);
      const build = (performance.now() - started) / 1000;
      loaded = size;
      const store = await createPostgresStore({ connectionString: database.url });
      const rawClient = new pg.Client({ connectionString: database.url });
      await rawClient.connect();
      results.push(
        ...(await measure("PostgreSQL", size, build, store, (terms) =>
          rawClient.query(
            "SELECT m.id, ts_rank(m.tsv, q, 1) AS score FROM memory_memories m, to_tsquery('english', $1) q WHERE m.tsv @@ q ORDER BY score DESC LIMIT 50",
            [terms.join(" | ")],
          ),
        )),
      );
      await rawClient.end();
      await store.close();
    }
  } finally {
    await database.drop();
  }
} finally {
  rmSync(directory, { recursive: true, force: true });
}

console.log(
  `${queryCount} queries per row (after 20 warm-up), two Zipf-ranked words each; ${tenants} tenants × ${usersPerTenant} users; Node ${process.versions.node}\n`,
);
console.log("| store | memories | bulk build s | path | p50 ms | p99 ms | mean ms | p50 vs raw |");
console.log("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |");
for (const row of results) {
  const raw = results.find(
    (item) => item.store === row.store && item.size === row.size && item.path.startsWith("raw"),
  )!;
  const mean = row.samples.reduce((sum, value) => sum + value, 0) / row.samples.length;
  console.log(
    `| ${row.store} | ${row.size.toLocaleString("en")} | ${row.build.toFixed(1)} | ${row.path} | ${percentile(row.samples, 0.5).toFixed(2)} | ${percentile(row.samples, 0.99).toFixed(2)} | ${mean.toFixed(2)} | ${(percentile(row.samples, 0.5) / percentile(raw.samples, 0.5)).toFixed(2)}× |`,
  );
}
