import { createTestDatabase } from "@tackle/test-support";
import { createPostgresDocumentStore } from "../src/server/postgres/index.ts";
import { lostUpdateSuite } from "./lost-update-rule.ts";

const database = await createTestDatabase("docscript_lost_updates");
lostUpdateSuite(
  "PostgreSQL",
  () => createPostgresDocumentStore({ connectionString: database.url }),
  () => database.drop(),
);
