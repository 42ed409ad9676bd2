import { createTestDatabase } from "@tackle/test-support";
import { createPostgresDocumentStore } from "../src/server/postgres/index.ts";
import { documentServerSuite } from "./document-server-suite.ts";

const database = await createTestDatabase("docscript");
documentServerSuite({
  name: "PostgreSQL",
  open: () => createPostgresDocumentStore({ connectionString: database.url }),
  cleanup: () => database.drop(),
});
