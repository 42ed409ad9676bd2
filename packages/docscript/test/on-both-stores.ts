/** One store check, run as a test on a SQLite file and on a fresh PostgreSQL database. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createTestDatabase } from "@tackle/test-support";
import type { DocumentStore } from "../src/server/document-store.ts";
import { createSqliteDocumentStore } from "../src/server/index.ts";
import { createPostgresDocumentStore } from "../src/server/postgres/index.ts";

export function describeOnBothStores(
  title: string,
  name: string,
  check: (store: DocumentStore) => Promise<void>,
): void {
  describe(title, () => {
    const directory = mkdtempSync(join(tmpdir(), `tackle-docscript-${name}-`));
    const databases: { drop(): Promise<void> }[] = [];
    after(async () => {
      rmSync(directory, { recursive: true, force: true });
      for (const database of databases) await database.drop();
    });

    it("SQLite", async () => {
      const store = createSqliteDocumentStore({ path: join(directory, "d.sqlite") });
      try {
        await check(store);
      } finally {
        await store.close();
      }
    });

    it("PostgreSQL", async () => {
      const database = await createTestDatabase(`docscript_member_${name}`);
      databases.push(database);
      const store = await createPostgresDocumentStore({ connectionString: database.url });
      try {
        await check(store);
      } finally {
        await store.close();
      }
    });
  });
}
