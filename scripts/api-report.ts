/**
 * `npm run api-report`: builds every public package in a scratch directory and writes each export
 * entry's API Extractor report to `packages/<name>/api/<entry>.api.md`. Commit the reports with the
 * change that moved the surface; the consumer test fails while they differ.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { apiReportsOf } from "../test/packaging/api-reports.ts";
import { buildPublicPackages, repositoryRoot } from "../test/packaging/pack-packages.ts";

const scratch = mkdtempSync(path.join(tmpdir(), "tackle-api-build-"));
try {
  for (const built of buildPublicPackages(scratch)) {
    for (const report of apiReportsOf(built.folder, built.directory)) {
      const target = path.join(repositoryRoot, report.file);
      mkdirSync(path.dirname(target), { recursive: true });
      writeFileSync(target, report.text);
      process.stdout.write(`${report.file}\n`);
    }
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
