/** The recovery sweep: takes over runs of this runner's graphs that no live driver vouches for. */
import { DurableError } from "../errors/durable-error.ts";
import { launchResume } from "./resume.ts";
import type { RunnerOptions } from "./runner-api.ts";
import type { RunnerState } from "./runner-state.ts";

export interface Sweeper {
  /** Stops the sweep and waits for a look in progress. */
  stop(): Promise<void>;
}

export function startSweeper(state: RunnerState, recover: RunnerOptions["recover"]): Sweeper {
  const everyMs =
    recover === false || state.leaseMs <= 0 ? 0 : Math.max(1000, recover?.everyMs ?? state.leaseMs);
  const batch = Math.max(1, Math.floor(recover === false ? 1 : (recover?.batch ?? 16)));
  let timer: NodeJS.Timeout | undefined;
  let sweeping: Promise<void> = Promise.resolve();
  const schedule = (delayMs: number): void => {
    timer = setTimeout(() => {
      sweeping = sweep(state, batch).finally(() => {
        if (!state.closed) schedule(everyMs);
      });
    }, delayMs);
    timer.unref();
  };
  // Runners started together spread their first looks over the interval.
  if (everyMs > 0) schedule(Math.round(everyMs * (0.5 + Math.random() / 2)));
  return {
    async stop() {
      clearTimeout(timer);
      await sweeping;
    },
  };
}

async function sweep(state: RunnerState, batch: number): Promise<void> {
  const names = [...state.graphs.keys()];
  if (names.length === 0) return;
  let stale: string[];
  try {
    stale = await state.store.findStaleRuns({ staleAfterMs: state.leaseMs, graphs: names, limit: batch });
  } catch (error) {
    state.logger.warn("durable recovery sweep could not read the store", { error: String(error) });
    return;
  }
  for (const threadId of stale) {
    if (state.closed) return;
    if (state.active.has(threadId)) continue;
    try {
      // The bare resume's claim: refused (run_active) unless the run is still silent for the lease
      // by the store's clock, under the row lock, so racing runners take it once between them.
      const launched = await launchResume(state, threadId);
      if (launched.firstSeq === 0) continue;
      state.logger.warn("durable run recovered by the sweep", { threadId, runId: launched.runId });
      launched.finished.catch(() => {});
    } catch (error) {
      if (DurableError.isInstance(error) && error.code === "run_active") continue;
      state.logger.warn("durable recovery sweep could not take a run over", {
        threadId,
        error: String(error),
      });
    }
  }
}
