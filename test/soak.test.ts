/**
 * The short fault-injection soak (bench/soak, 1.5 s per phase): a NATS server, a mesh node and a
 * document server are each SIGKILLed and restarted, and a private PostgreSQL stopped and started, under mixed load; nothing acknowledged is lost,
 * nothing is duplicated, nothing hangs, and every workload succeeds again after each fault.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { formatTable, runSoak } from "../bench/soak/soak.ts";

it("the short soak: lost 0, duplicated 0 across a NATS server, a mesh node and a document server killed and PostgreSQL restarted", {
  timeout: 170_000,
}, async (t) => {
  const rows = await runSoak({ phaseMs: 1500 });
  t.diagnostic(`\n${formatTable(rows)}`);
  assert.equal(rows.length, 8);
  for (const row of rows) {
    assert.equal(row.lost, 0, `${row.workload} / ${row.fault}: lost`);
    assert.equal(row.duplicated, 0, `${row.workload} / ${row.fault}: duplicated`);
    assert.ok(row.succeeded > 0, `${row.workload} / ${row.fault}: nothing succeeded`);
    assert.ok(Number.isFinite(row.p50.after), `${row.workload} / ${row.fault}: nothing ran after the fault`);
  }
});
