/**
 * A write that met a SQLite file another connection held locked past the busy timeout (ADR 0130): the
 * store threw `lock_timeout` (transient, nothing written) and the driver recorded it as the run's
 * failure once the lock was free ("Tool … failed: A write transaction: another connection held the
 * SQLite file's lock…", for good), with the failure's frame written past the seqs the lost write held.
 * Now the caller is told `unavailable` (retryable), the run stays `running`, and a takeover after its
 * lease finishes it from the journal with whole seqs. Found by `sqlite-lock.property.test.ts`.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import {
  type CommitBatch,
  createGraph,
  createRunner,
  DurableError,
  type DurableStore,
  tool,
} from "@tackle/durable";
import { createSqliteStore } from "@tackle/durable/sqlite";
import { underLoadMs } from "@tackle/test-support";

const directory = mkdtempSync(join(tmpdir(), "durable-sqlite-lock-"));
after(() => rmSync(directory, { recursive: true, force: true }));

const leaseMs = 200;

/** `store` whose first commit `when` matches runs while `locker` holds the file's write lock. */
function lockedUnder(store: DurableStore, locker: DatabaseSync, when: (batch: CommitBatch) => boolean) {
  let armed = true;
  return new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (property !== "commit") return value;
      return async (threadId: string, owner: string, batch: CommitBatch) => {
        if (!armed || !when(batch)) return target.commit(threadId, owner, batch);
        armed = false;
        locker.exec("BEGIN IMMEDIATE");
        try {
          return await target.commit(threadId, owner, batch);
        } finally {
          locker.exec("ROLLBACK");
        }
      };
    },
  });
}

it("a write locked out past the busy timeout leaves the run to a takeover, the caller told unavailable", async () => {
  const path = join(directory, "runs.db");
  const store = createSqliteStore({ path, busyTimeoutMs: 20 });
  const locker = new DatabaseSync(path);
  const effects: string[] = [];
  const graph = createGraph<{ a?: number; b?: number }>("locked").node("work", async (_state, ctx) => {
    const a = await tool(ctx, "charge", { amount: 1 }, () => {
      effects.push("charge");
      return 1;
    });
    const b = await ctx.step("after", () => {
      effects.push("after");
      return 2;
    });
    return { a, b };
  });
  // The tool's `done` record is the write the lock keeps out; the lock is free again at once.
  const locked = lockedUnder(store, locker, (batch) =>
    (batch.journal ?? []).some((record) => record.state === "done"),
  );
  const runner = createRunner({ store: locked, graphs: [graph], leaseMs, recover: false });
  try {
    const told = await runner.start(graph, {}, { threadId: "t" }).then(
      () => undefined,
      (error: unknown) => error,
    );
    assert.ok(DurableError.isInstance(told), `told ${String(told)}`);
    assert.equal(told.code, "unavailable");
    assert.equal(told.retryable, true);
    assert.equal((await store.getRun("t"))?.status, "running", "the run is left to a takeover, not failed");
    await sleep(underLoadMs(leaseMs * 2));
    const done = await runner.resume<{ a?: number; b?: number }>("t");
    assert.equal(done.status, "completed");
    assert.deepEqual(done.state, { a: 1, b: 2 });
    // The tool's started record landed, its done did not: it runs again once, as its next attempt.
    assert.deepEqual(effects, ["charge", "charge", "after"]);
    const frames = await store.readFrames("t", 0);
    assert.deepEqual(
      frames.map((frame) => frame.seq),
      frames.map((_frame, index) => index + 1),
    );
    assert.ok(!frames.some((frame) => frame.type === "run_failed"));
  } finally {
    await runner.close();
    locker.close();
    await store.close();
  }
});
