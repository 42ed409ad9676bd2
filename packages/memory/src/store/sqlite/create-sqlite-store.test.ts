import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { it } from "node:test";
import { createMemoryService } from "../../service/create-memory-service.ts";
import { createSqliteStore } from "./create-sqlite-store.ts";

it("a file from before the scoped search index is migrated on open and stays searchable", async () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-memory-migrate-"));
  const path = join(directory, "old.db");
  try {
    const service = createMemoryService({ store: createSqliteStore({ path }) });
    const { memory } = await service.add("t", { userId: "u", content: "Kept through the migration" });
    await service.close();
    // Rewind the file to the earlier layout: no scope tokens, an external-content FTS table.
    const database = new DatabaseSync(path);
    database.exec(`
      DROP TRIGGER memories_search_insert; DROP TRIGGER memories_search_delete; DROP TRIGGER memories_search_update;
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
