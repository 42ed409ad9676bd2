/**
 * The short fault-injection soak (bench/soak, 1 s per phase on a quiet machine, longer under load): a
 * NATS server, a mesh node, a document server, a durable runner and a memory service are each
 * SIGKILLed and restarted, and a private PostgreSQL stopped and started, under mixed load (mesh calls,
 * document pushes, durable runs, memory adds and import jobs); nothing acknowledged is lost, nothing is
 * duplicated outside durable's stated crash window, nothing hangs, every workload succeeds again after
 * each fault, and the run and the job the killed runner and service had in hand are finished by
 * another process. Then the video assistant (examples/video-assistant, 2 s per phase, scaled alike):
 * its driver, each of its two nodes and the Python child SIGKILLed, its broker SIGKILLed and
 * restarted; every run completes, each transcription runs once, each caption lands once, each user's
 * style is remembered once.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { testTimeoutMs, underLoadMs } from "@tackle/test-support";
import { formatTable, runSoak } from "../bench/soak/soak.ts";
import { formatVideoTable, runVideoSoak } from "../bench/soak/video-assistant-soak.ts";

it("the short soak: lost 0, duplicated 0 across five kinds of process killed and PostgreSQL restarted", {
  // About a minute a run, up to two runs; the rest is room for a loaded machine and for the settle
  // deadline of a run that hangs. Up to four times that under load (every phase's processes start and
  // work slower).
  timeout: testTimeoutMs(400_000),
}, async (t) => {
  // A kill is work taken over only if the killed process held a run or a job at that instant. The
  // memory service is stopped while it holds an import job and killed only if it still holds one
  // (bench/soak/memory-victim.ts), so its takeover is seen in every run; the durable runner is killed
  // after a look that finds it driving a run, and the run can end between that look and the SIGKILL.
  // A miss leaves nothing to take over, so nothing can be lost by it: the soak is run once more, and
  // every run must lose and duplicate nothing; the takeovers must be seen in one of them.
  let takenOver = { durableRuns: 0, memoryJobs: 0 };
  for (
    let attempt = 1;
    attempt <= 2 && (takenOver.durableRuns === 0 || takenOver.memoryJobs === 0);
    attempt++
  ) {
    // 1 s phases on a quiet machine, longer under load: each workload must succeed again between a
    // fault's repair and the next fault, and on a busy machine one memory add can take seconds.
    // Capped at 4 s: past that a phase only makes the run longer, not the workloads likelier to recover.
    const { rows, notes, takeovers } = await runSoak({ phaseMs: Math.min(4000, underLoadMs(1000)) });
    t.diagnostic(`run ${attempt}\n${formatTable(rows)}\n${notes.join("\n")}`);
    assert.equal(rows.length, 30);
    for (const row of rows) {
      assert.equal(row.lost, 0, `${row.workload} / ${row.fault}: lost`);
      assert.equal(row.duplicated, 0, `${row.workload} / ${row.fault}: duplicated outside a stated window`);
      assert.ok(row.succeeded > 0, `${row.workload} / ${row.fault}: nothing succeeded`);
      assert.ok(
        row.succeededAfterRepair > 0,
        `${row.workload} / ${row.fault}: nothing succeeded after the repair`,
      );
    }
    takenOver = {
      durableRuns: Math.max(takenOver.durableRuns, takeovers.durableRuns),
      memoryJobs: Math.max(takenOver.memoryJobs, takeovers.memoryJobs),
    };
  }
  // The kills landed mid-work, and another process finished that work.
  assert.ok(takenOver.durableRuns > 0, "no durable run was taken over after the runner SIGKILL");
  assert.ok(takenOver.memoryJobs > 0, "no import job of the killed memory service finished on the other");
});

it("the video assistant's soak: each of its processes killed and the broker restarted, lost 0, duplicated 0", {
  // About two minutes on the loaded machine; the rest is room for the settle deadline of a run that
  // hangs. Up to four times that under load.
  timeout: testTimeoutMs(600_000),
}, async (t) => {
  // Capped at 8 s: at load 28 the scaled phases were 28 s each and the soak ran past 18 minutes.
  const { rows, notes } = await runVideoSoak({ phaseMs: Math.min(8000, underLoadMs(2000)) });
  t.diagnostic(`\n${formatVideoTable(rows)}\n${notes.join("\n")}`);
  assert.equal(rows.length, 6);
  for (const row of rows) {
    assert.equal(row.lost, 0, `${row.fault}: lost`);
    assert.equal(row.duplicated, 0, `${row.fault}: duplicated`);
    assert.equal(row.wrongStyle, 0, `${row.fault}: captions not in the remembered style`);
    assert.equal(row.completed, row.runs, `${row.fault}: a run did not complete`);
  }
  // Runs were under way through the faults (a phase may start none on a slow machine; all of them, some).
  assert.ok(rows.slice(1).reduce((sum, row) => sum + row.completed, 0) >= 5, "too few runs met the faults");
});
