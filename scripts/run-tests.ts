/**
 * The project's test command: every suite under Node's test runner, then the closing count line
 * `N passed, N failed` that CI reads. Extra arguments narrow the run to those files or globs.
 */
import { spawn } from "node:child_process";

const defaultGlobs = [
  "packages/*/src/**/*.test.ts",
  "packages/*/test*/**/*.test.ts",
  "test-support/src/**/*.test.ts",
  "examples/**/*.test.ts",
  "test/**/*.test.ts",
];
const requested = process.argv.slice(2);
const globs = requested.length > 0 ? requested : defaultGlobs;
// Two files at a time on a 2-core machine: the sandbox and restart suites assert wall-clock bounds.
const concurrency = process.env.TACKLE_TEST_CONCURRENCY ?? "2";

const child = spawn(
  process.execPath,
  [
    "--conditions=@tackle/source",
    "--test",
    `--test-concurrency=${concurrency}`,
    "--test-timeout=180000",
    // A suite that leaves a handle open (a socket, a child) must not hang the whole run after its tests end.
    "--test-force-exit",
    "--test-reporter=spec",
    ...globs,
  ],
  {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, FORCE_COLOR: process.stdout.isTTY ? "1" : "0" },
  },
);

let passed = 0;
let failed = 0;
let tail = "";
child.stdout.on("data", (chunk: Buffer) => {
  process.stdout.write(chunk);
  tail = (tail + chunk.toString()).slice(-4000);
});
child.on("exit", (code, signal) => {
  // The spec reporter ends with `ℹ pass N` and `ℹ fail N`.
  passed = Number(/ℹ pass (\d+)/.exec(tail)?.[1] ?? 0);
  failed = Number(/ℹ fail (\d+)/.exec(tail)?.[1] ?? 0);
  if (code !== 0 && failed === 0) failed = 1;
  process.stdout.write(`\n${passed} passed, ${failed} failed\n`);
  process.exit(code ?? (signal ? 1 : 0));
});
