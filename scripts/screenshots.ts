/**
 * Regenerates the console's screenshots under docs/console/ (shown in packages/cli/README.md): runs the
 * browser tests with TACKLE_SCREENSHOT_DIR pointing at a temp dir, then copies into docs/console/ only
 * the pictures whose look changed (new ones, another size, or more than a clock time's or an id's worth
 * of pixels), so a rerun does not rewrite every committed PNG; `--all` writes every one. The tests
 * themselves write to a temp dir.
 *
 *   npm run screenshots [-- --all]
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { updateScreenshots } from "../packages/cli/test/browser/screenshot-look.ts";

const root = fileURLToPath(new URL("../", import.meta.url));
const target = fileURLToPath(new URL("../docs/console/", import.meta.url));
const fresh = mkdtempSync(join(tmpdir(), "tackle-screenshots-"));
try {
  const result = spawnSync(
    process.execPath,
    [
      "--conditions=@tackle/source",
      "--test",
      "--test-timeout=180000",
      "--test-force-exit",
      "packages/cli/test/browser/console-page.test.ts",
      "packages/cli/test/browser/console-runs.test.ts",
    ],
    { cwd: root, stdio: "inherit", env: { ...process.env, TACKLE_SCREENSHOT_DIR: fresh } },
  );
  if (result.status !== 0) process.exit(result.status ?? 1);
  mkdirSync(target, { recursive: true });
  for (const update of updateScreenshots(fresh, target, process.argv.includes("--all"))) {
    console.log(`${update.written ? "written " : "kept    "} ${update.name}: ${update.reason}`);
  }
} finally {
  rmSync(fresh, { recursive: true, force: true });
}
