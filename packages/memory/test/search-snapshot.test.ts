/**
 * A search keeps its scope's memories in process while the tenant's memory generation holds (ADR
 * 0369): every write that changes what a search finds — an add, an update, a delete, a purge, a write
 * by another store on the same database — is found by the next search, on SQLite and PostgreSQL.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createMemoryService, createSqliteStore, type MemoryService, type MemoryStore } from "@tackle/memory";
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-snapshot-"));
const databases: TestDatabase[] = [];
after(async () => {
  rmSync(directory, { recursive: true, force: true });
  for (const database of databases) await database.drop().catch(() => undefined);
});

const backends: { name: string; open: () => Promise<{ first: MemoryStore; second: MemoryStore }> }[] = [
  {
    name: "SQLite",
    open: async () => {
      const path = join(directory, "snapshot.db");
      return { first: createSqliteStore({ path }), second: createSqliteStore({ path }) };
    },
  },
  {
    name: "PostgreSQL",
    open: async () => {
      const database = await createTestDatabase("tackle_memory_snapshot");
      databases.push(database);
      return {
        first: await createPostgresStore({ connectionString: database.url }),
        second: await createPostgresStore({ connectionString: database.url }),
      };
    },
  },
];

const found = async (service: MemoryService, query: string) =>
  (await service.search("acme", { userId: "ann", query, limit: 10 })).results.map(
    (result) => result.memory.content,
  );

for (const backend of backends) {
  describe(`${backend.name}: searches see every write after a cached search`, () => {
    it("an add, an update, a delete, another store's write and a purge", async () => {
      const { first, second } = await backend.open();
      const service = createMemoryService({ store: first });
      const other = createMemoryService({ store: second });
      try {
        const { memory } = await service.add("acme", {
          userId: "ann",
          content: "Ann keeps a red kayak at the lake",
        });
        await service.add("acme", { userId: "bob", content: "Bob keeps a kayak too" });
        assert.deepEqual(await found(service, "kayak"), ["Ann keeps a red kayak at the lake"]);

        await service.add("acme", { userId: "ann", content: "Ann bought a second kayak, a blue one" });
        assert.equal((await found(service, "kayak")).length, 2, "an add is found");

        await service.updateMemory("acme", memory.id, { content: "Ann keeps a red canoe at the lake" });
        assert.deepEqual(
          await found(service, "canoe"),
          ["Ann keeps a red canoe at the lake"],
          "an update is found",
        );
        assert.deepEqual(await found(service, "kayak"), ["Ann bought a second kayak, a blue one"]);

        await service.deleteMemory("acme", memory.id, { reason: "tested" });
        assert.deepEqual(await found(service, "canoe"), [], "a delete leaves the results");

        await other.add("acme", { userId: "ann", content: "Ann rents a kayak trailer on weekends" });
        assert.equal((await found(service, "kayak")).length, 2, "another store's write is found");

        const hit = (await service.search("acme", { userId: "ann", query: "trailer", limit: 1 })).results[0]!;
        const again = (await service.search("acme", { userId: "ann", query: "trailer", limit: 1 }))
          .results[0]!;
        assert.equal(
          again.memory.accessCount,
          hit.memory.accessCount + 1,
          "results carry the memory as stored now (its access count moved)",
        );

        await other.purge("acme", { userId: "ann" });
        assert.deepEqual(await found(service, "kayak"), [], "a purge by another store leaves the results");
      } finally {
        await service.close();
        await other.close();
      }
    });
  });
}
