/**
 * How many runs one tenant may hold open — running or paused — through the HTTP API (default 10,000):
 * a paused run holds no driving place (`maxDrivingRuns`), so a tenant's legal starts of runs that pause
 * at once would otherwise add rows, frames and expiry bookkeeping without end. Past the bound a start or
 * fork is refused `too_many_open_runs` (409, not retryable: only the tenant's own answers, cancels or
 * expiries free a place) before anything is stored. The store keeps a counter per tenant, raised in the
 * start's transaction (ADRs 0123, 0127).
 */
import type { Runner } from "../runner/create-runner.ts";

export const defaultMaxOpenRuns = 10_000;

/** `runner` with its `launch` and `fork` bound to `max` open runs per key prefix (`prefixOf` a thread's key). */
export function limitOpenRuns(runner: Runner, max: number, prefixOf: (threadId: string) => string): Runner {
  if (max === Number.POSITIVE_INFINITY) return runner;
  if (!(Number.isInteger(max) && max >= 0)) throw new RangeError("maxOpenRuns is an integer ≥ 0 or Infinity");
  const limited: Pick<Runner, "launch" | "fork"> = {
    launch: (graph, input, options = {}) =>
      runner.launch(graph, input, {
        ...options,
        openLimit: { prefix: prefixOf(options.threadId ?? ""), max },
      }),
    fork: (threadId, options) =>
      runner.fork(threadId, {
        ...options,
        openLimit: { prefix: prefixOf(options.threadId ?? threadId), max },
      }),
  };
  // Every other method is the runner's own, whatever kind of object it is.
  return Object.assign(Object.create(runner) as Runner, limited);
}
