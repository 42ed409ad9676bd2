/** Which of the host's flags reach the workers: module resolution and a CPU profile, nothing else. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { workerExecArgv } from "./create-sandbox-pool.ts";

test("a worker shares the host's conditions and CPU-profile flags and none of its others", () => {
  const saved = [...process.execArgv];
  try {
    process.execArgv.splice(
      0,
      process.execArgv.length,
      "--conditions=@tackle/source",
      "--cpu-prof",
      "--cpu-prof-dir=/tmp/profiles",
      "--cpu-prof-interval=500",
      "--inspect=9229",
      "--allow-natives-syntax",
      "--expose-gc",
      "--cpu-prof-name=host.cpuprofile",
    );
    assert.deepEqual(workerExecArgv(), [
      "--conditions=@tackle/source",
      "--cpu-prof",
      "--cpu-prof-dir=/tmp/profiles",
      "--cpu-prof-interval=500",
      "--experimental-vm-modules",
      "--disable-warning=ExperimentalWarning",
    ]);
  } finally {
    process.execArgv.splice(0, process.execArgv.length, ...saved);
  }
});
