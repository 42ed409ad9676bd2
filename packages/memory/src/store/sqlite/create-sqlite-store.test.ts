import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { it } from "node:test";
import { createMemoryService } from "../../service/create-memory-service.ts";
import { createSqliteStore } from "./create-sqlite-store.ts";

/**
 * Takes a file written by this code back to the names the layouts below had (before migration 6):
 * tables unprefixed, and no indexes, triggers or chunk index, which migration 1 makes again.
 */
function withoutPrefixes(database: DatabaseSync): void {
  const objects = database
    .prepare("SELECT type, name FROM sqlite_master WHERE type IN ('index', 'trigger') AND sql IS NOT NULL")
    .all() as { type: string; name: string }[];
  for (const { type, name } of objects) database.exec(`DROP ${type.toUpperCase()} ${name}`);
  database.exec("DROP TABLE memory_chunks_fts");
  const tables = ["memories", "memories_search", "access_log", "events", "documents", "chunks"];
  for (const table of [...tables, "core_blocks", "traces", "jobs", "idempotency_keys"]) {
    database.exec(`ALTER TABLE memory_${table} RENAME TO ${table}`);
  }
}

it("a file from before the scoped search index is migrated on open and stays searchable", async () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-migrate-"));
  const path = join(directory, "old.db");
  try {
    const service = createMemoryService({ store: createSqliteStore({ path }) });
    const { memory } = await service.add("t", { userId: "u", content: "Kept through the migration" });
    await service.close();
    // Rewind the file to the earlier layout: no scope tokens, an external-content FTS table.
    const database = new DatabaseSync(path);
    withoutPrefixes(database);
    // Files of that layout were written before schema versions: no user_version, no application_id.
    database.exec(`
      PRAGMA user_version = 0; PRAGMA application_id = 0;
      DROP TABLE memories_search;
      ALTER TABLE memories DROP COLUMN scope_tokens;
      CREATE VIRTUAL TABLE memories_fts USING fts5(content, content='memories', content_rowid='seq');
      INSERT INTO memories_fts(memories_fts) VALUES ('rebuild');`);
    database.close();
    const reopened = createMemoryService({ store: createSqliteStore({ path }) });
    const found = await reopened.search("t", { userId: "u", query: "migration" });
    assert.deepEqual(
      found.results.map((result) => result.memory.id),
      [memory.id],
    );
    assert.equal((await reopened.search("other", { userId: "u", query: "migration" })).results.length, 0);
    await reopened.close();
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
});

it("a file from before the prefix index is rebuilt on open; its memories are found by the new queries", async () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-prefix-"));
  const path = join(directory, "old.db");
  try {
    const service = createMemoryService({ store: createSqliteStore({ path }) });
    const allergic = await service.add("t", { userId: "u", content: "I'm allergic to peanuts" });
    await service.add("t", { userId: "u", content: "Rainy weather all week" });
    await service.add("other", { userId: "u", content: "Another tenant is allergic to cats" });
    await service.close();
    // Rewind the file to the layout without the prefix index, filled as the old triggers filled it.
    const database = new DatabaseSync(path);
    withoutPrefixes(database);
    // Files of that layout were written before schema versions: no user_version, no application_id.
    database.exec(`
      PRAGMA user_version = 0; PRAGMA application_id = 0;
      DROP TABLE memories_search;
      CREATE VIRTUAL TABLE memories_search USING fts5(
        content, scope, content='', contentless_delete=1, tokenize='porter unicode61');
      INSERT INTO memories_search(rowid, content, scope) SELECT seq, content, scope_tokens FROM memories;
      CREATE TRIGGER memories_search_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memories_search(rowid, content, scope) VALUES (new.seq, new.content, new.scope_tokens);
      END;`);
    database.close();
    const store = createSqliteStore({ path });
    const reopened = createMemoryService({ store });
    // A prefix term ("aller*" finds "allergic") is answered by the rebuilt prefix index.
    const found = await store.searchMemories("t", { userId: "u" }, ["aller*"], { limit: 10 });
    assert.deepEqual(
      found.map((result) => result.memory.id),
      [allergic.memory.id],
    );
    const added = await reopened.add("t", { userId: "u", content: "My sister relocated to Lisbon" });
    const relocation = await store.searchMemories("t", { userId: "u" }, ["reloc*"], { limit: 10 });
    assert.deepEqual(
      relocation.map((result) => result.memory.id),
      [added.memory.id],
    );
    await reopened.close();
    const check = new DatabaseSync(path);
    const table = check
      .prepare("SELECT sql FROM sqlite_master WHERE name = 'memory_memories_search'")
      .get() as {
      sql: string;
    };
    const triggers = check
      .prepare(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'memory_memories_search_%' ORDER BY name",
      )
      .all()
      .map((row) => (row as { name: string }).name);
    check.close();
    assert.match(table.sql, /prefix='5'/);
    assert.deepEqual(triggers, [
      "memory_memories_search_delete",
      "memory_memories_search_insert",
      "memory_memories_search_update",
    ]);
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
});
