/**
 * What `schema-migrations.test.ts` checks of a store once it has upgraded a database written before
 * schema versioning: that new rows are stamped above the kept ones, and the indexes, counts and names
 * the migrations left in the SQLite file or the PostgreSQL tables.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import type { MemoryStore } from "@tackle/memory";
import type pg from "pg";

/** The upgraded SQLite store stamps and indexes a memory of tenant-b's u2 written after the upgrade. */
export async function checkSqliteStampsNewRows(store: MemoryStore): Promise<void> {
  // Migration 9: rows kept from before it carry stamp 0; a row written after it is the one change
  // since the tenant's stamp before the write (ADR 0541).
  const upgraded = await store.memoryChanges!("tenant-b", { userId: "u2" }, { limit: 10 });
  assert.equal(upgraded.rows.length, 1, "the kept row is read whole");
  assert.deepEqual(
    (await store.memoryChanges!("tenant-b", { userId: "u2" }, { since: upgraded.stamp, limit: 10 })).rows,
    [],
  );
  await store.insertMemory({
    ...(await store.listMemories("tenant-b", { userId: "u2" }, { limit: 1, order: "recent" }))[0]!,
    id: "after-migration",
    content: "Written after the rename",
    dedupeKey: "after-migration",
  });
  const changed = await store.memoryChanges!(
    "tenant-b",
    { userId: "u2" },
    { since: upgraded.stamp, limit: 10 },
  );
  assert.deepEqual(
    changed.rows.map((row) => row.memory.id),
    ["after-migration"],
    "migration 9 stamps a new row above the tenant's stamp",
  );
  assert.ok(changed.stamp > upgraded.stamp);
  const written = await store.searchMemories("tenant-b", { userId: "u2" }, ["rename"], { limit: 5 });
  assert.deepEqual(
    written.map((hit) => hit.memory.id),
    ["after-migration"],
    "the renamed tables' triggers index new rows",
  );
}

/**
 * The upgraded SQLite file at `path`: its version, the indexes migrations 2, 10 and 11 added, the
 * access rows migration 7 summed, the table migration 3 added, and every name `memory_` (migration 6).
 */
export function checkSqliteSchema(path: string): void {
  const database = new DatabaseSync(path);
  assert.equal((database.prepare("PRAGMA user_version").get() as { user_version: number }).user_version, 16);
  // Migration 11 (ADR 0551): the jobs a tenant has waiting are counted on an index of those alone.
  const waitingPlan = database
    .prepare(
      "EXPLAIN QUERY PLAN SELECT count(*) AS jobs FROM memory_jobs WHERE tenant_id = 'tenant-a' AND status IN ('queued', 'running')",
    )
    .all()
    .map((step) => (step as { detail: string }).detail)
    .join("; ");
  assert.match(waitingPlan, /INDEX memory_jobs_waiting/, waitingPlan);
  // Migration 10: a user's cut (ADR 0545) walks an index of its rows in write order, on traces and jobs.
  for (const table of ["memory_traces", "memory_jobs"]) {
    const columns = database.prepare(`PRAGMA index_info(${table}_user)`).all();
    assert.deepEqual(
      columns.map((column) => (column as { name: string }).name),
      ["tenant_id", "user_id", "seq"],
    );
    for (const user of ["user_id = 'u1'", "user_id IS NULL"]) {
      const plan = database
        .prepare(
          `EXPLAIN QUERY PLAN SELECT seq FROM ${table} WHERE tenant_id = 'tenant-a' AND ${user} ORDER BY seq DESC LIMIT 10 OFFSET 5`,
        )
        .all()
        .map((step) => (step as { detail: string }).detail)
        .join("; ");
      assert.match(plan, new RegExp(`USING (COVERING )?INDEX ${table}_user`), plan);
      assert.doesNotMatch(plan, /TEMP B-TREE/, `the index gives the order: ${plan}`);
    }
  }
  assert.equal(
    Number((database.prepare("SELECT count(*) AS n FROM memory_access_log").get() as { n: number }).n),
    7,
    "migration 7 sums the nine access rows into seven counts",
  );
  assert.ok(
    database
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'memory_memories_scope_seq'")
      .get(),
    "migration 2 adds the index the neighbouring-turn lookup reads",
  );
  assert.ok(
    database
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memory_idempotency_keys'")
      .get(),
    "migration 3 adds the table of idempotency keys",
  );
  const unprefixed = database
    .prepare(
      "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'memory\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
    )
    .all();
  assert.deepEqual(unprefixed, [], "migration 6 names every table, index and trigger memory_");
  database.close();
}

/** The upgraded PostgreSQL store stamps, counts and indexes a memory of tenant-a's u1 written after it. */
export async function checkPostgresStampsNewRows(store: MemoryStore): Promise<void> {
  // Migration 7 renamed the tables under their serial sequences and generation trigger: a new
  // row takes the next number, moves the tenant's generation and is found.
  const generation = await store.memoryGeneration!("tenant-a");
  const [kept] = await store.listMemories("tenant-a", { userId: "u1" }, { limit: 1, order: "recent" });
  const upgraded = await store.memoryChanges!("tenant-a", { userId: "u1" }, { limit: 10 });
  assert.equal(upgraded.rows.length, 2, "migration 10: the kept rows are read whole");
  await store.insertMemory({
    ...kept!,
    id: "after-rename",
    content: "Written after the rename",
    dedupeKey: "n",
  });
  assert.notEqual(await store.memoryGeneration!("tenant-a"), generation);
  const changed = await store.memoryChanges!(
    "tenant-a",
    { userId: "u1" },
    { since: upgraded.stamp, limit: 10 },
  );
  assert.deepEqual(
    changed.rows.map((row) => row.memory.id),
    ["after-rename"],
    "migration 10 stamps a new row above the tenant's stamp",
  );
  const written = await store.searchMemories("tenant-a", { userId: "u1" }, ["rename"], { limit: 5 });
  assert.deepEqual(
    written.map((hit) => hit.memory.id),
    ["after-rename"],
  );
}

/** The upgraded PostgreSQL tables' indexes for a user's cut and for the rows that name no user. */
export async function checkPostgresUserIndexes(client: pg.Client): Promise<void> {
  // Migration 11: a user's cut (ADR 0545) walks an index of its rows in write order.
  // Rows that name no user have a partial index: PostgreSQL would sort them after `IS NULL`.
  const userIndexes = await client.query(
    `SELECT indexname, indexdef FROM pg_indexes WHERE indexname IN
     ('memory_traces_user', 'memory_jobs_user', 'memory_traces_no_user', 'memory_jobs_no_user') ORDER BY indexname`,
  );
  assert.deepEqual(
    userIndexes.rows.map((row) => [
      row.indexname,
      /\(([^)]*)\)( WHERE .*)?$/.exec(row.indexdef)?.slice(1, 3),
    ]),
    [
      ["memory_jobs_no_user", ["tenant_id, seq", " WHERE (user_id IS NULL)"]],
      ["memory_jobs_user", ["tenant_id, user_id, seq", undefined]],
      ["memory_traces_no_user", ["tenant_id, seq", " WHERE (user_id IS NULL)"]],
      ["memory_traces_user", ["tenant_id, user_id, seq", undefined]],
    ],
  );
  // An empty table's plan may take the tenant's index; without it (and a scan of the table) each
  // cut, of a user or of the rows that name none, walks its index backwards, unsorted.
  await client.query("BEGIN");
  await client.query("DROP INDEX memory_traces_tenant");
  await client.query("SET LOCAL enable_seqscan = off");
  for (const [user, index] of [
    ["user_id = 'u1'", "memory_traces_user"],
    ["user_id IS NULL", "memory_traces_no_user"],
  ] as const) {
    const plan = await client.query(
      `EXPLAIN SELECT seq FROM memory_traces WHERE tenant_id = 'tenant-a' AND ${user} ORDER BY seq DESC OFFSET 5 LIMIT 10`,
    );
    const text = plan.rows.map((row) => row["QUERY PLAN"]).join("; ");
    assert.match(text, new RegExp(`Index (Only )?Scan Backward using ${index} `), text);
    assert.doesNotMatch(text, /Sort/, text);
  }
  await client.query("ROLLBACK");
}

/**
 * The upgraded PostgreSQL tables: the usage migration 9 counted, the access rows migration 8 summed,
 * what migrations 3, 4 and 6 added, and every name `memory_` (migration 7).
 */
export async function checkPostgresUsageAndNames(client: pg.Client): Promise<void> {
  // Migration 9 counted the rows stored before it (the legacy rows have no history: their own
  // content counts); the memory written after it was charged on insert (ADR 0538).
  const usage = await client.query(
    "SELECT memories::int, memory_bytes::int, events::int, event_bytes::int FROM memory_tenant_usage WHERE tenant_id = 'tenant-a'",
  );
  assert.deepEqual(usage.rows, [
    {
      memories: 3,
      memory_bytes:
        "Prefers tea over coffee".length +
        "Lives in Lisbon near the river".length +
        "Written after the rename".length,
      events: 1,
      event_bytes: "hello there".length,
    },
  ]);
  const accessRows = await client.query("SELECT count(*)::int AS n FROM memory_access_log");
  assert.equal(accessRows.rows[0].n, 7, "migration 8 sums the nine access rows into seven counts");
  const index = await client.query("SELECT 1 FROM pg_indexes WHERE indexname = 'memory_memories_scope_seq'");
  assert.equal(index.rowCount, 1, "migration 3 adds the index the neighbouring-turn lookup reads");
  const keys = await client.query("SELECT 1 FROM pg_tables WHERE tablename = 'memory_idempotency_keys'");
  assert.equal(keys.rowCount, 1, "migration 4 adds the table of idempotency keys");
  const generations = await client.query("SELECT 1 FROM pg_tables WHERE tablename = 'memory_generations'");
  assert.equal(generations.rowCount, 1, "migration 6 adds each tenant's memory generation");
  const unprefixed = await client.query(
    `SELECT relname FROM pg_class JOIN pg_namespace ON pg_namespace.oid = relnamespace
     WHERE nspname = current_schema() AND relname NOT LIKE 'memory\\_%' AND relname NOT LIKE 'tackle\\_migrations%'`,
  );
  assert.deepEqual(unprefixed.rows, [], "migration 7 names every table, index and sequence memory_");
}
