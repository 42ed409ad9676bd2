/**
 * What a core-block save costs (ADR 0557). Each save counts its tenant's blocks and their bytes against
 * `maxCoreBlocks` and `maxCoreBlockBytes` (ADR 0551); summing the length of every value read each
 * value, so on a SQLite file a save cost in proportion to everything the tenant held (12.7 ms at 50
 * blocks of 60,000 bytes, 91 ms at 600). Each block now keeps its bytes, summed on an index; and with
 * both limits off a save counts nothing, nor waits for the tenant's counter row.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, it } from "node:test";
import { createSqliteStore, type MemoryStore } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import pg from "pg";
import { heldBlocksSql } from "../src/store/tenant-usage.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-block-cost-"));
const databases: TestDatabase[] = [];
after(async () => {
  for (const database of databases) await database.drop();
  rmSync(directory, { recursive: true, force: true });
});

/** The defaults of `quotas` (ADR 0551). */
const limits = { coreBlocks: 10_000, coreBlockBytes: 64 * 1024 ** 2, queuedJobs: 100 };
const off = { coreBlocks: Infinity, coreBlockBytes: Infinity, queuedJobs: 100 };
/** A block as stored before the migrations (SQLite 13, PostgreSQL 14): 30 characters of 3 bytes. */
const oldBlock = "€".repeat(30);
/** 20,000 characters of 3 bytes: the most a block holds. */
const large = "€".repeat(20_000);

function block(value: string, version: number) {
  return { label: "notes", value, limit: 20_000, version, updatedAt: new Date().toISOString() };
}

/** Gives `tenant` `count` blocks of 60,000 bytes, one scope each, one save at a time. */
async function fill(store: MemoryStore, tenant: string, count: number) {
  for (let index = 0; index < count; index += 1) {
    const saved = await store.saveBlocks(
      tenant,
      { userId: `u${index}` },
      [{ block: block(large, 1), expectedVersion: 0 }],
      limits,
    );
    assert.ok(saved);
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

// A core-block save's cost (ADR 0557).
it("does not grow with the blocks its tenant holds (SQLite file)", async () => {
  const store = createSqliteStore({ path: join(directory, "cost.db") });
  try {
    await fill(store, "few", 10);
    await fill(store, "many", 400);
    // Rewrites of one block, the two tenants taking turns, so the machine's load falls on both alike.
    const took: Record<string, number[]> = { few: [], many: [] };
    const versions: Record<string, number> = { few: 1, many: 1 };
    for (let round = 0; round < 21; round += 1) {
      for (const tenant of ["few", "many"]) {
        const version = versions[tenant]!;
        const value = `${round % 2 === 0 ? "£" : "€"}${large.slice(1)}`;
        const started = performance.now();
        const saved = await store.saveBlocks(
          tenant,
          { userId: "u0" },
          [{ block: block(value, version + 1), expectedVersion: version }],
          limits,
        );
        took[tenant]!.push(performance.now() - started);
        assert.ok(saved);
        versions[tenant] = version + 1;
      }
    }
    const [few, many] = [median(took.few!), median(took.many!)];
    assert.ok(
      many < 3 * few + 2,
      `a save at 400 held blocks took ${many.toFixed(2)} ms, at 10 ${few.toFixed(2)} ms`,
    );
    // The counts stay exact: the last rewrite (round 20) put "£" (2 bytes) first.
    assert.deepEqual(await store.heldUsage("many"), {
      coreBlocks: 400,
      coreBlockBytes: 400 * 60_000 - 1,
      queuedJobs: 0,
    });
  } finally {
    await store.close();
  }
});

it("with both limits off, neither counts nor waits for the tenant's counter row (PostgreSQL)", async () => {
  const database = await createTestDatabase("tackle_memory_block_cost");
  databases.push(database);
  const store = await createPostgresStore({ connectionString: database.url });
  const holder = new pg.Client({ connectionString: database.url });
  await holder.connect();
  try {
    await store.saveBlocks("acme", { userId: "u0" }, [{ block: block("a", 1), expectedVersion: 0 }], limits);
    // Another write of the tenant holds its counter row (ADR 0538's first lock of every write).
    await holder.query("BEGIN");
    await holder.query("SELECT * FROM memory_tenant_usage WHERE tenant_id = 'acme' FOR UPDATE");
    const unbounded = store.saveBlocks(
      "acme",
      { userId: "u1" },
      [{ block: block(large, 1), expectedVersion: 0 }],
      off,
    );
    const deadline = new Promise<"late">((resolve) => setTimeout(resolve, 5_000, "late").unref());
    assert.equal(await Promise.race([unbounded, deadline]), true, "the save with no block limit waited");
    // A save under a limit waits for the lock, then counts what the other write left.
    const bounded = store.saveBlocks(
      "acme",
      { userId: "u2" },
      [{ block: block(large, 1), expectedVersion: 0 }],
      limits,
    );
    const waited = new Promise<"waiting">((resolve) => setTimeout(resolve, 300, "waiting").unref());
    assert.equal(await Promise.race([bounded, waited]), "waiting");
    await holder.query("COMMIT");
    assert.equal(await bounded, true);
    assert.deepEqual(await store.heldUsage("acme"), {
      coreBlocks: 3,
      coreBlockBytes: 1 + 2 * 60_000,
      queuedJobs: 0,
    });
  } finally {
    await holder.query("ROLLBACK").catch(() => undefined);
    await holder.end();
    await store.close();
  }
});

it("counts blocks stored before the migration with their bytes, on the index alone (SQLite file)", async () => {
  const path = join(directory, "migrated.db");
  await createSqliteStore({ path }).close();
  // As a file before migration 13: no column, no index, a block stored as the store wrote it then.
  const file = new DatabaseSync(path);
  file.exec(`DROP INDEX memory_core_blocks_bytes; ALTER TABLE memory_core_blocks DROP COLUMN value_bytes;
    PRAGMA user_version = 12;`);
  file
    .prepare(
      "INSERT INTO memory_core_blocks (tenant_id, scope_key, label, value, limit_chars, version, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .run("acme", "u:u1", "persona", oldBlock, 100, 1, "2026-12-01T00:00:00.000Z");
  file.close();
  const store = createSqliteStore({ path });
  try {
    assert.deepEqual(await store.heldUsage("acme"), { coreBlocks: 1, coreBlockBytes: 90, queuedJobs: 0 });
  } finally {
    await store.close();
  }
  const migrated = new DatabaseSync(path);
  try {
    const plan = migrated
      .prepare(`EXPLAIN QUERY PLAN ${heldBlocksSql("'acme'")}`)
      .all()
      .map((step) => (step as { detail: string }).detail)
      .join("; ");
    assert.match(plan, /USING COVERING INDEX memory_core_blocks_bytes \(tenant_id=\?\)/, plan);
  } finally {
    migrated.close();
  }
});

it("counts blocks stored before the migration with their bytes, on the index alone (PostgreSQL)", async () => {
  const database = await createTestDatabase("tackle_memory_block_bytes");
  databases.push(database);
  await (await createPostgresStore({ connectionString: database.url })).close();
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    // As a database before migration 14: no column (its index goes with it), a block stored then.
    await client.query("ALTER TABLE memory_core_blocks DROP COLUMN value_bytes");
    await client.query("DELETE FROM tackle_migrations WHERE store = 'memory' AND version >= 14");
    await client.query(
      `INSERT INTO memory_core_blocks (tenant_id, scope_key, label, value, limit_chars, version, updated_at)
       VALUES ('acme', 'u:u1', 'persona', $1, 100, 1, '2026-12-01T00:00:00.000Z')`,
      [oldBlock],
    );
    const store = await createPostgresStore({ connectionString: database.url });
    try {
      assert.deepEqual(await store.heldUsage("acme"), { coreBlocks: 1, coreBlockBytes: 90, queuedJobs: 0 });
    } finally {
      await store.close();
    }
    // A table this small may be scanned, and before a vacuum no page is known all-visible, so the
    // planner may read the heap through the primary key (it did on fresh CI databases, once even after
    // the vacuum: on one row the two indexes cost the same). With the tenant's blocks a tenant can hold
    // (a few hundred), vacuumed as autovacuum keeps a live table, and without those choices, the count
    // reads the index alone.
    await client.query(
      `INSERT INTO memory_core_blocks (tenant_id, scope_key, label, value, limit_chars, version, updated_at, value_bytes)
       SELECT 'acme', 'u:u' || n, 'persona', 'x', 100, 1, '2026-12-01T00:00:00.000Z', 1
       FROM generate_series(2, 400) AS n`,
    );
    await client.query("VACUUM (ANALYZE) memory_core_blocks");
    await client.query("BEGIN");
    await client.query("SET LOCAL enable_seqscan = off");
    await client.query("SET LOCAL enable_bitmapscan = off");
    const plan = (await client.query(`EXPLAIN ${heldBlocksSql("'acme'")}`)).rows
      .map((row) => row["QUERY PLAN"])
      .join("; ");
    await client.query("ROLLBACK");
    assert.match(plan, /Index Only Scan using memory_core_blocks_bytes /, plan);
  } finally {
    await client.end();
  }
});
