/** How a job of the memory service ended, polled until it did (ADRs 0561, 0564). */
import assert from "node:assert/strict";
import { MemoryError, type MemoryService } from "@tackle/memory";

/**
 * `succeeded` or `failed` with the job's record, or `purged` once its record is gone; never `queued`
 * or `running` past the deadline (a job a purge raced is not left running).
 */
export async function jobEndOf(
  service: MemoryService,
  tenant: string,
  id: string,
  deadlineMs = 20_000,
): Promise<{ status: string; error?: unknown; result?: unknown }> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const job = await service.getJob(tenant, id).then(
      (answer) => answer.job,
      (error: unknown) => {
        if (MemoryError.isInstance(error) && error.code === "not_found") return undefined;
        throw error;
      },
    );
    if (job === undefined) return { status: "purged" };
    if (job.status === "succeeded" || job.status === "failed") return job;
    assert.ok(Date.now() < deadline, `job ${id} (${job.type}) still ${job.status} after ${deadlineMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
