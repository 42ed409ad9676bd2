/**
 * The one-timer expiry queue against an oracle (ADR 0123): random schedules, reschedules, drops and
 * clock advances. Every run scheduled and not dropped fires once, never before its time and within the
 * timer's 5 ms slack after it (and the test clock's 1 ms grain); a dropped or rescheduled expiry never fires at its old time; one timer at most.
 */
import assert from "node:assert/strict";
import { mock, test } from "node:test";
import { seededRandom } from "@tackle/test-support";
import { createExpiryQueue } from "./expiry.ts";

/**
 * The mock clock a millisecond at a time: a mock `tick` runs a timer with the clock already at the tick's
 * end, and a timer armed inside a callback only at the next tick, so one tick of 1 ms is the clock's grain.
 */
function advance(ms: number): void {
  for (let i = 0; i < ms; i++) mock.timers.tick(1);
}

test("2,000 random runs of the expiry queue agree with an oracle", () => {
  mock.timers.enable({ apis: ["setTimeout", "Date"], now: 1_000_000 });
  try {
    for (let seed = 1; seed <= 2000; seed++) {
      const next = seededRandom(seed);
      const oracle = new Map<string, number>();
      const fired: string[] = [];
      const queue = createExpiryQueue((threadId) => {
        const at = oracle.get(threadId);
        assert.ok(at !== undefined, `seed ${seed}: ${threadId} fired, not scheduled`);
        assert.ok(
          Date.now() >= at && Date.now() <= at + 6,
          `seed ${seed}: ${threadId} fired at ${Date.now()}, due ${at}`,
        );
        oracle.delete(threadId);
        fired.push(threadId);
      });
      const steps = 1 + Math.floor(next() * 60);
      for (let step = 0; step < steps; step++) {
        const id = `t${Math.floor(next() * 12)}`;
        const roll = next();
        if (roll < 0.5) {
          const at = Date.now() + Math.floor(next() * 200);
          queue.schedule(id, at);
          oracle.set(id, at);
        } else if (roll < 0.65) {
          queue.drop(id);
          oracle.delete(id);
        } else advance(1 + Math.floor(next() * 60));
        assert.ok(queue.size().timers <= 1, `seed ${seed}: more than one timer`);
        assert.equal(queue.size().runs, oracle.size, `seed ${seed}: the queue's runs are the oracle's`);
        assert.ok(queue.size().entries <= 2 * oracle.size + 64, `seed ${seed}: stale entries piled up`);
      }
      advance(300);
      assert.equal(oracle.size, 0, `seed ${seed}: every expiry fired`);
      queue.close();
    }
  } finally {
    mock.timers.reset();
  }
});
