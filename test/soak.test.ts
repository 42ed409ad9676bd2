/**
 * The short fault-injection soak (bench/soak, 1 s per phase): a NATS server, a mesh node, a
 * document server, a durable runner and a memory service are each SIGKILLed and restarted, and a
 * private PostgreSQL stopped and started, under mixed load (mesh calls, document pushes, durable runs,
 * memory adds and import jobs); nothing acknowledged is lost, nothing is duplicated outside durable's
 * stated crash window, nothing hangs, every workload succeeds again after each fault, and the run and
 * the job the killed runner and service had in hand are finished by another process.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { formatTable, runSoak } from "../bench/soak/soak.ts";

it("the short soak: lost 0, duplicated 0 across five kinds of process killed and PostgreSQL restarted", {
  // About a minute; the rest is room for a loaded machine and for the settle deadline of a run that hangs.
  timeout: 240_000,
}, async (t) => {
  const { rows, notes, takeovers } = await runSoak({ phaseMs: 1000 });
  t.diagnostic(`\n${formatTable(rows)}\n${notes.join("\n")}`);
  assert.equal(rows.length, 30);
  // The kills landed mid-work, and another process finished that work.
  assert.ok(takeovers.durableRuns > 0, "no durable run was taken over after the runner SIGKILL");
  assert.ok(takeovers.memoryJobs > 0, "no import job of the killed memory service finished on the other");
  for (const row of rows) {
    assert.equal(row.lost, 0, `${row.workload} / ${row.fault}: lost`);
    assert.equal(row.duplicated, 0, `${row.workload} / ${row.fault}: duplicated outside a stated window`);
    assert.ok(row.succeeded > 0, `${row.workload} / ${row.fault}: nothing succeeded`);
    assert.ok(
      row.succeededAfterRepair > 0,
      `${row.workload} / ${row.fault}: nothing succeeded after the repair`,
    );
  }
});
