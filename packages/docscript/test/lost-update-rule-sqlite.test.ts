import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSqliteDocumentStore } from "../src/server/index.ts";
import { lostUpdateSuite } from "./lost-update-rule.ts";

const directory = await mkdtemp(join(tmpdir(), "docscript-lost-updates-"));
lostUpdateSuite(
  "SQLite",
  async () => createSqliteDocumentStore({ path: join(directory, "documents.db") }),
  () => rm(directory, { recursive: true, force: true }),
);
