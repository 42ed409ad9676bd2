/**
 * A leased job whose success the store refuses for good (a result it cannot hold, not a transient
 * error) is written failed: left running under its own process's lease, it would be claimed again at
 * the next poll (ADR 0570) and its handler run again and again. The store here is a stand-in for the
 * PostgreSQL job leases, so that its `finish` can refuse a success the way jsonb refuses a `\u0000`.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { silentLogger } from "@tackle/core";
import type { JobLeases, MemoryStore, StoredJob } from "../store/memory-store.ts";
import { createJobRunner } from "./job-runner.ts";

it("writes a leased job failed when the store refuses its success for good, and runs it once", async () => {
  let stored: StoredJob = {
    id: "job-1",
    tenantId: "t",
    type: "novelty_scan",
    status: "queued",
    input: {},
    createdAt: new Date().toISOString(),
  };
  const written: StoredJob[] = [];
  const leases: JobLeases = {
    leaseMs: 200,
    // The job is claimable while it is not finished: queued, or (ADR 0570) running under this owner.
    claimNext: async () => (stored.status === "queued" || stored.status === "running" ? stored : undefined),
    renew: async () => true,
    finish: async (job) => {
      if (job.status === "succeeded")
        throw Object.assign(new Error("unsupported Unicode escape sequence"), { code: "22P05" });
      written.push(job);
      stored = job;
      return true;
    },
  };
  const store = { jobLeases: leases, afterCommit: (run: () => void) => run() } as unknown as MemoryStore;
  let runs = 0;
  const runner = createJobRunner({
    store,
    logger: silentLogger,
    now: () => new Date().toISOString(),
    handlers: {
      import: async () => undefined,
      consolidate: async () => undefined,
      novelty_scan: async () => {
        runs += 1;
        return { text: "\u0000" };
      },
    },
  });
  runner.resume();
  await sleep(600);
  await runner.close();
  assert.equal(runs, 1, "the handler ran again after its success was refused");
  assert.equal(written.length, 1);
  assert.equal(written[0]?.status, "failed");
  assert.match(String(written[0]?.error?.message), /unsupported Unicode escape/);
});
