/**
 * In a chat (write a turn, search, write, search) a scope's snapshot reads only the memories each
 * write changed (ADR 0541). A scope past the snapshot's bound is searched by the store: each search
 * after a write must not read the scope's first `maximumScope + 1` memories into the process again
 * only to find it still past the bound. On SQLite and PostgreSQL.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import { createMemoryService } from "../src/service/create-memory-service.ts";
import { createScopeSnapshots } from "../src/service/scope-snapshot.ts";
import type { MemoryStore } from "../src/store/memory-store.ts";
import { createPostgresStore } from "../src/store/postgres/create-postgres-store.ts";
import { createSqliteStore } from "../src/store/sqlite/create-sqlite-store.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-scope-snapshot-"));
const databases: TestDatabase[] = [];
after(async () => {
  rmSync(directory, { recursive: true, force: true });
  for (const database of databases) await database.drop().catch(() => undefined);
});

const backends: { name: string; open: () => Promise<MemoryStore> }[] = [
  { name: "SQLite", open: async () => createSqliteStore({ path: join(directory, "chat.db") }) },
  {
    name: "PostgreSQL",
    open: async () => {
      const database = await createTestDatabase("tackle_memory_scope_snapshot");
      databases.push(database);
      return createPostgresStore({ connectionString: database.url });
    },
  },
];

/** The store, counting the memories its `listMemories` and `memoryChanges` answer. */
function countingListed(store: MemoryStore) {
  const counted = { listed: 0 };
  const listing = new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key);
      if (key === "listMemories") {
        return async (...parameters: Parameters<MemoryStore["listMemories"]>) => {
          const memories = await target.listMemories(...parameters);
          counted.listed += memories.length;
          return memories;
        };
      }
      if (key === "memoryChanges") {
        return async (...parameters: Parameters<NonNullable<MemoryStore["memoryChanges"]>>) => {
          const changes = await target.memoryChanges!(...parameters);
          counted.listed += changes.rows.length;
          return changes;
        };
      }
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { listing, counted };
}

for (const backend of backends) {
  describe(`${backend.name}: a chat in a scope within the bound`, () => {
    it("reads only the memories each write changed, not the scope (ADR 0541)", async () => {
      const store = await backend.open();
      const service = createMemoryService({ store });
      const { listing, counted } = countingListed(store);
      const snapshots = createScopeSnapshots(listing);
      const carl = { userId: "carl" };
      try {
        await service.addBatch("acme", {
          userId: "carl",
          memories: Array.from({ length: 300 }, (_, index) => ({
            kind: "episode" as const,
            content: `Carl: turn ${index} about the garden`,
          })),
        });
        await snapshots.get("acme", carl);
        assert.equal(counted.listed, 300, "the first search reads the scope");
        const readPerSearch: number[] = [];
        for (let turn = 0; turn < 4; turn += 1) {
          const { memory } = await service.add("acme", {
            userId: "carl",
            kind: "episode",
            content: `Carl: a new turn ${turn}`,
          });
          let before = counted.listed;
          await snapshots.get("acme", carl);
          readPerSearch.push(counted.listed - before);
          await service.updateMemory("acme", memory.id, { content: `Carl: the new turn ${turn}, edited` });
          before = counted.listed;
          await snapshots.get("acme", carl);
          readPerSearch.push(counted.listed - before);
          await service.add("acme", { userId: "dora", content: `Dora wrote ${turn}` });
          before = counted.listed;
          await snapshots.get("acme", carl);
          readPerSearch.push(counted.listed - before);
        }
        assert.deepEqual(
          readPerSearch,
          Array.from({ length: 4 }, () => [1, 1, 0]).flat(),
          "a turn added or edited reads that turn; another user's write reads none",
        );
        assert.equal((await snapshots.get("acme", carl))?.live, 304);
      } finally {
        await service.close();
      }
    });
  });

  describe(`${backend.name}: a chat in a scope past the snapshot's bound`, () => {
    it("reads no memory into the process per search after a write, and comes back in once the scope shrinks", async () => {
      const store = await backend.open();
      const service = createMemoryService({ store });
      const { listing, counted } = countingListed(store);
      const snapshots = createScopeSnapshots(listing, { maximumScope: 10 });
      const ann = { userId: "ann" };
      try {
        await service.addBatch("acme", {
          userId: "ann",
          memories: Array.from({ length: 12 }, (_, index) => ({
            kind: "episode" as const,
            content: `Ann: turn ${index} of a long chat`,
          })),
        });
        assert.equal(await snapshots.get("acme", ann), undefined, "12 turns are past a bound of 10");
        assert.equal(counted.listed, 11, "the first search lists the bound and one more");

        const listedPerSearch: number[] = [];
        for (let turn = 0; turn < 5; turn += 1) {
          await service.add("acme", { userId: "ann", kind: "episode", content: `Ann: a new turn ${turn}` });
          const before = counted.listed;
          assert.equal(await snapshots.get("acme", ann), undefined);
          listedPerSearch.push(counted.listed - before);
          await service.add("acme", { userId: "bob", content: `Bob wrote ${turn}` });
          const beforeOther = counted.listed;
          assert.equal(await snapshots.get("acme", ann), undefined);
          listedPerSearch.push(counted.listed - beforeOther);
        }
        assert.deepEqual(
          listedPerSearch,
          Array.from({ length: 10 }, () => 0),
          "no memory listed per search after a write to the scope or another user's",
        );

        const { memories } = await service.listMemories("acme", { userId: "ann", limit: 100 });
        for (const memory of memories.slice(0, 7)) {
          await service.deleteMemory("acme", memory.id, { reason: "shrinking the scope" });
        }
        const snapshot = await snapshots.get("acme", ann);
        assert.equal(snapshot?.live, 10, "ten active turns are searched in process again");
      } finally {
        await service.close();
      }
    });
  });
}
