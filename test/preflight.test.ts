/**
 * `npm test` sets itself up: with a server missing and no root, it stops before the type check and the
 * suites, names what is missing and the one command to run, and still ends with the count line CI reads.
 * (As root it runs scripts/ensure-services.sh instead; that path installs Debian packages and is what
 * .ci/run exercises on a fresh machine.)
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { it } from "node:test";
import { underLoadMs } from "@tackle/test-support";
import { missingServices } from "../scripts/preflight.ts";

const root = path.join(import.meta.dirname, "..");

it("without root and with Chromium missing, npm test stops at once naming the command to run", () => {
  const runTests = [
    process.execPath,
    path.join(root, "scripts", "run-tests.ts"),
    "test/no-such-suite.test.ts",
  ];
  // As root, drop to nobody for the run (root would install what is missing).
  const [command, ...args] =
    process.getuid?.() === 0
      ? ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", ...runTests]
      : runTests;
  const started = Date.now();
  const run = spawnSync(command as string, args, {
    cwd: root,
    encoding: "utf8",
    timeout: underLoadMs(60_000),
    env: { ...process.env, TACKLE_CHROMIUM: path.join(root, "no-chromium-here") },
  });
  assert.equal(run.status, 1, run.stderr);
  assert.match(run.stdout, /need Chromium, which this machine lacks/);
  assert.match(run.stdout, /sudo bash scripts\/ensure-services\.sh/);
  assert.match(run.stdout, /\n0 passed, 1 failed\n$/);
  assert.doesNotMatch(run.stdout, /ℹ tests/, "the test runner started");
  // At once: well before the suites could have run, however slowly this machine starts a process.
  assert.ok(Date.now() - started < underLoadMs(30_000), "it did not stop at once");
});

it("on this machine nothing is missing (the suites' servers answer)", async () => {
  assert.deepEqual(await missingServices(), []);
});
