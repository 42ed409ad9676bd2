/** What every group of the store conformance suite shares: its cases' context and assertions. */
import assert from "node:assert/strict";
import { MemoryError, type MemoryService, type MemoryServiceOptions, type MemoryStore } from "@tackle/memory";
import { underLoadMs } from "@tackle/test-support";

/** The store under test and a service over it, as they are when a case starts. */
export interface ConformanceContext {
  readonly store: MemoryStore;
  readonly service: MemoryService;
  /** A fresh tenant: each case works in its own. */
  readonly tenant: () => string;
  /**
   * Another service on the store under test (another process on one database), or on `options.store`
   * wrapping it: closed when the case ends, its job runner with it, without closing the shared store.
   */
  readonly serviceOver: (options?: Partial<MemoryServiceOptions>) => MemoryService;
}

/** Cases by name, each run through the service on the store under test. */
export type ConformanceCases = Record<string, (context: ConformanceContext) => Promise<void>>;

export async function rejectsWithCode(promise: Promise<unknown>, code: string, status?: number) {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(MemoryError.isInstance(error), `expected a MemoryError, got ${String(error)}`);
    assert.equal(error.code, code);
    if (status !== undefined) assert.equal(error.status, status);
    return true;
  });
}

/** Polls the job until it ends: 10 s on a quiet machine, scaled by the load (how long a job runs is not tested here). */
export async function waitForJob(service: MemoryService, tenantId: string, id: string) {
  const waitMs = underLoadMs(10_000);
  const deadline = performance.now() + waitMs;
  for (;;) {
    const { job } = await service.getJob(tenantId, id);
    if (job.status === "succeeded" || job.status === "failed") return job;
    if (performance.now() > deadline)
      throw new Error(`job ${id} did not finish in ${waitMs} ms (${job.status})`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
