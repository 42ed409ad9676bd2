import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSqliteDocumentStore } from "../src/server/index.ts";
import { documentServerSuite } from "./document-server-suite.ts";

const directory = await mkdtemp(join(tmpdir(), "docscript-sqlite-"));
documentServerSuite({
  name: "SQLite",
  open: async () => createSqliteDocumentStore({ path: join(directory, "documents.db") }),
  cleanup: () => rm(directory, { recursive: true, force: true }),
});
