/** The conformance suite on the real PostgreSQL (TACKLE_TEST_PG), in a scratch database. */
import { createPostgresStore } from "@tackle/memory/postgres";
import { createTestDatabase, type TestDatabase } from "@tackle/test-support";
import { storeConformance } from "./support/store-conformance.ts";

let database: TestDatabase | undefined;

storeConformance("postgres", {
  async open() {
    database ??= await createTestDatabase("tackle_memory");
    return createPostgresStore({ connectionString: database.url });
  },
  async destroy() {
    await database?.drop();
  },
});
