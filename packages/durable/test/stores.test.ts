/** The store conformance suite against memory, a SQLite file and the real PostgreSQL server. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createMemoryStore } from "@tackle/durable";
import { createPostgresStore } from "@tackle/durable/postgres";
import { createSqliteStore } from "@tackle/durable/sqlite";
import { createTestDatabase } from "@tackle/test-support";
import { storeConformance } from "./store-conformance.ts";

storeConformance("memory", async () => {
  const store = createMemoryStore();
  return { store, reopen: async () => store, cleanup: () => store.close() };
});

storeConformance("sqlite", async () => {
  const directory = mkdtempSync(join(tmpdir(), "durable-store-"));
  const path = join(directory, "runs.sqlite");
  const opened = [createSqliteStore({ path })];
  return {
    store: opened[0]!,
    async reopen() {
      const store = createSqliteStore({ path });
      opened.push(store);
      return store;
    },
    async cleanup() {
      for (const store of opened) await store.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
});

storeConformance("postgres", async () => {
  const database = await createTestDatabase("durable");
  const opened = [await createPostgresStore({ connectionString: database.url })];
  return {
    store: opened[0]!,
    async reopen() {
      const store = await createPostgresStore({ connectionString: database.url });
      opened.push(store);
      return store;
    },
    async cleanup() {
      for (const store of opened) await store.close();
      await database.drop();
    },
  };
});
