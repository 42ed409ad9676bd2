/**
 * Deadlines for waits whose length is not what a test checks (a process starting, a child's handshake):
 * the quiet-machine figure scaled by how loaded the machine is when the test runs. At load average 30 on
 * 2 cores a `node` start with TypeScript stripping took ~25 s and a `python3` start 11 s wall (0.7 s
 * CPU), so a fixed 10 s or 30 s wait failed on timing alone.
 */
import { availableParallelism, loadavg } from "node:os";

/** Runnable processes per core over the last minute, at least 1 (a quiet machine). */
export function loadFactor(): number {
  const [lastMinute = 0] = loadavg();
  return Math.max(1, lastMinute / availableParallelism());
}

/**
 * A limit per test: `quietMs` on a quiet machine, up to four times that under load, since a test that
 * starts several processes pays each start's lag. By default the runner's limit (scripts/run-tests.ts):
 * 180 s quiet; a test that needs longer (the soak) states its own quiet figure.
 */
export function testTimeoutMs(quietMs = 180_000): number {
  return Math.ceil(quietMs * Math.min(4, loadFactor()));
}

/**
 * `quietMs` (what the wait needs on a quiet machine, with room) times the load factor, never less than
 * `quietMs` and at most five sixths of the runner's limit per test, so a real hang still fails naming
 * its wait rather than as a test timeout. Read when the wait starts, so it follows the load.
 */
export function underLoadMs(quietMs: number): number {
  const ceilingMs = Math.floor((testTimeoutMs() * 5) / 6);
  return Math.max(quietMs, Math.min(ceilingMs, Math.ceil(quietMs * loadFactor())));
}

/**
 * How late this machine runs a due timer right now: the worst overshoot of `samples` 10 ms timers. A
 * watchdog's bound in a test is its quiet-machine slack plus this, since the watchdog's own timer and
 * the work it stops wait for a core alike.
 */
export async function measuredLagMs(samples = 10): Promise<number> {
  let worst = 0;
  for (let sample = 0; sample < samples; sample++) {
    const started = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 10));
    worst = Math.max(worst, performance.now() - started - 10);
  }
  return Math.ceil(worst);
}
