/**
 * The lost-update property with every stored push's fork made the live document (ADR 0496's path,
 * which only pushes of over 1,024 atoms take by default and the property's small plans never reach).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSqliteDocumentStore } from "../src/server/index.ts";
import { lostUpdateSuite } from "./lost-update-rule.ts";

const directory = await mkdtemp(join(tmpdir(), "docscript-lost-updates-fork-"));
lostUpdateSuite(
  "SQLite, every push's fork made the live document",
  async () => createSqliteDocumentStore({ path: join(directory, "documents.db") }),
  () => rm(directory, { recursive: true, force: true }),
  { forkTakesOverAtoms: 0 },
);
