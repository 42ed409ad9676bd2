/**
 * The project's test command: the servers the suites use (installed and started when missing, as root:
 * scripts/preflight.ts), the type check, every suite under Node's test runner, then the closing count line
 * `N passed, N failed` that CI reads. Extra arguments narrow the run to those files or globs.
 * A whole run that leaves the working tree changed — a tracked file modified, a new file written, even
 * an ignored one — fails and names what it left: tests write into temporary directories only.
 */
import { spawn, spawnSync } from "node:child_process";
import path from "node:path";
import { testTimeoutMs } from "../test-support/src/under-load.ts";
import { preflight } from "./preflight.ts";

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

/** `git status` lines (ignored files included, by directory), or undefined outside a git checkout. */
function treeState(): Set<string> | undefined {
  const status = spawnSync("git", ["status", "--porcelain", "--ignored"], { encoding: "utf8" });
  if (status.status !== 0 || status.error !== undefined) return undefined;
  return new Set(status.stdout.split("\n").filter((line) => line !== ""));
}
// Checked on the whole run (`npm test`, CI), not on the narrowed runs of development, where a file
// saved while the tests ran would count.
const treeBefore = requested.length === 0 || process.env.CI === "true" ? treeState() : undefined;

// The servers first: installed and started here as root, or named with the command to run (scripts/preflight.ts).
const notReady = await preflight();
if (notReady !== undefined) {
  process.stdout.write(`${notReady}\n\n0 passed, 1 failed\n`);
  process.exit(1);
}
// Then the types, on whole runs (a narrowed run during development skips it: `npm run typecheck`).
if (requested.length === 0) {
  const tsc = path.join(import.meta.dirname, "..", "node_modules", "typescript", "bin", "tsc");
  // The packages, then the console page (its own config: DOM types), as `npm run typecheck` does.
  for (const project of ["tsconfig.json", "packages/cli/src/console/web/page/tsconfig.json"]) {
    const typecheck = spawnSync(process.execPath, [tsc, "-p", project, "--noEmit"], { stdio: "inherit" });
    if (typecheck.status !== 0) {
      process.stdout.write(`\nThe type check of ${project} failed (above).\n\n0 passed, 1 failed\n`);
      process.exit(1);
    }
  }
}

const child = spawn(
  process.execPath,
  [
    "--conditions=@tackle/source",
    // A test file's process hung at its exit in CI (14 min, no CPU): the main thread, exiting, joined
    // V8's worker threads while one of them, compiling baseline code concurrently, waited for a
    // garbage collection only the main thread could run (gdb: ConcurrentBaselineCompiler in
    // CollectionBarrier::AwaitCollectionBackground; main in NodePlatform::Shutdown). Baseline code is
    // compiled on the main thread instead; the files' processes inherit the flag.
    "--no-concurrent-sparkplug",
    "--test",
    `--test-concurrency=${concurrency}`,
    // 180 s per test, scaled by the machine's load when the run starts (up to 4x): process starts slow down.
    `--test-timeout=${testTimeoutMs()}`,
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
let pending = "";
// The spec reporter prints `ℹ pass N` and `ℹ fail N` in its summary, followed by the details of every
// failing test (which can run long), so the counts are read line by line as they pass, not from the end.
const readCounts = (line: string) => {
  const count = /^ℹ (pass|fail) (\d+)$/.exec(line.trim());
  if (count?.[1] === "pass") passed = Number(count[2]);
  if (count?.[1] === "fail") failed = Number(count[2]);
};
child.stdout.on("data", (chunk: Buffer) => {
  process.stdout.write(chunk);
  const lines = (pending + chunk.toString()).split("\n");
  pending = lines.pop() ?? "";
  for (const line of lines) readCounts(line);
});
child.on("exit", (code, signal) => {
  readCounts(pending);
  const treeAfter = treeBefore === undefined ? undefined : treeState();
  const left = [...(treeAfter ?? [])].filter((line) => !treeBefore?.has(line));
  if (left.length > 0) {
    process.stdout.write(
      `\n✖ the run changed the working tree (tests must write to temporary directories):\n`,
    );
    for (const line of left) process.stdout.write(`  ${line}\n`);
    failed += 1;
  }
  const exitCode = left.length > 0 ? 1 : (code ?? (signal ? 1 : 0));
  if (exitCode !== 0 && failed === 0) failed = 1;
  process.stdout.write(`\n${passed} passed, ${failed} failed\n`);
  process.exit(exitCode);
});
