/**
 * Regenerates the console's screenshots under docs/console/ (shown in packages/cli/README.md): runs the
 * browser tests with TACKLE_SCREENSHOT_DIR pointing there. The tests themselves write to a temp dir.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../", import.meta.url));
const target = fileURLToPath(new URL("../docs/console/", import.meta.url));
const result = spawnSync(
  process.execPath,
  [
    "--conditions=@tackle/source",
    "--test",
    "--test-timeout=180000",
    "--test-force-exit",
    "packages/cli/test/browser/console-page.test.ts",
  ],
  { cwd: root, stdio: "inherit", env: { ...process.env, TACKLE_SCREENSHOT_DIR: target } },
);
if (result.status === 0) console.log(`screenshots written to ${target}`);
process.exit(result.status ?? 1);
