/**
 * How many runs one tenant may have driving at once through the HTTP API (default 64): a caller's
 * legal starts, resumes and forks, sent by the thousand, would otherwise each drive a run in this process at
 * once. Past the bound a start or resume is refused `too_many_runs` (429, retryable) before anything is
 * stored; a run that pauses, completes or fails frees its place. Paused runs hold none. A run resumed at
 * its approval's expiry takes a place too, waiting for one rather than passing the bound (ADR 0124).
 */
import { createPlaces } from "@tackle/core/internal";
import { DurableError } from "../errors/durable-error.ts";
import type { Runner } from "../runner/create-runner.ts";
import { type DrivingGate, drivingGateHook } from "../runner/expiry-load.ts";

export const defaultMaxDrivingRuns = 64;

/** `runner` with its `launch`, `launchResume` and `fork` counted per tenant (`tenantOf` a thread's key). */
export function limitDrivingRuns(
  runner: Runner,
  max: number,
  tenantOf: (threadId: string) => string,
): Runner {
  const places = createPlaces({ max, name: "maxDrivingRuns" });
  const listeners = new Set<() => void>();
  // A place given back is offered to the expiries waiting for one first, in the same turn, so a burst
  // of them drains before a request takes the place again.
  const driving: DrivingGate = {
    keyOf: tenantOf,
    take(tenant) {
      const free = places.take(tenant);
      if (free === undefined) return undefined;
      let given = false;
      return () => {
        if (given) return;
        given = true;
        free();
        for (const listener of listeners) listener();
      };
    },
    onFree(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
  (runner as { [drivingGateHook]?: (gate: DrivingGate) => void })[drivingGateHook]?.(driving);
  const admit = (threadId: string | undefined) => {
    const tenant = threadId === undefined ? "" : tenantOf(threadId);
    const free = driving.take(tenant);
    if (free === undefined) {
      throw new DurableError(
        "too_many_runs",
        `${max} runs are driving for this caller already; retry when one pauses or ends`,
        { retryable: true, data: { driving: places.held(tenant), max } },
      );
    }
    return free;
  };
  const counted = async <Launched extends { finished: Promise<unknown> }>(
    threadId: string | undefined,
    launch: () => Promise<Launched>,
  ): Promise<Launched> => {
    const free = admit(threadId);
    try {
      const launched = await launch();
      launched.finished.then(free, free);
      return launched;
    } catch (error) {
      free();
      throw error;
    }
  };
  const limited: Pick<Runner, "launch" | "launchResume" | "fork"> = {
    launch: (graph, input, options) => counted(options?.threadId, () => runner.launch(graph, input, options)),
    launchResume: (threadId, answers, options) =>
      counted(threadId, () => runner.launchResume(threadId, answers, options)),
    // A fork drives its new thread to a pause or the end within the call.
    async fork(threadId, options) {
      const free = admit(options.threadId ?? threadId);
      try {
        return await runner.fork(threadId, options);
      } finally {
        free();
      }
    },
  };
  // Every other method is the runner's own, whatever kind of object it is.
  return Object.assign(Object.create(runner) as Runner, limited);
}
