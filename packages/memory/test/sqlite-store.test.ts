/** The conformance suite on the embedded SQLite store (a real file). */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSqliteStore } from "@tackle/memory";
import { storeConformance } from "./support/store-conformance.ts";

const directory = mkdtempSync(join(tmpdir(), "tackle-memory-"));

storeConformance("sqlite", {
  async open() {
    return createSqliteStore({ path: join(directory, "memory.db") });
  },
  async destroy() {
    rmSync(directory, { recursive: true, force: true });
  },
});
