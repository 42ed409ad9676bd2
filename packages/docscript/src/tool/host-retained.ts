/**
 * What a run's host work retains, measured in its host worker and held to the run's limit (ADR 0490):
 * the growth of Loro's WebAssembly memory (the run document's ops, the plan's export; that memory never
 * shrinks, so its growth is what the run made the worker keep), the growth of the worker's V8 heap (the
 * session's overlay, checks, preview), and bytes the run hands on to be kept elsewhere (its uploads,
 * staged until the plan is committed or dropped, and the plan's update, kept with the plan). A reading
 * over the limit is confirmed after a full collection of the worker's heap before the run fails, so
 * garbage never fails a run. What reading the document's rows from the server grows (the rows a
 * projection reading on demand holds for the document's runs, ADR 0466) is the document's, not the
 * run's: it is credited back, up to the limit again (ADR 0481).
 */
import v8 from "node:v8";
import vm from "node:vm";
import { loroBytes } from "../document/loro-memory.ts";

export { loroBytes };

/** The bytes a run's host work may retain by default: 256 MiB. */
export const defaultRunRetainedMb = 256;

let collect: (() => void) | undefined;

/** A full collection of this thread's heap (the flag is set for the process; workers share it). */
function collectGarbage(): void {
  if (collect === undefined) {
    v8.setFlagsFromString("--expose-gc");
    collect = vm.runInNewContext("gc") as () => void;
  }
  collect();
}

const heapBytes = (): number => v8.getHeapStatistics().used_heap_size;

/** One run's retained bytes, from the moment it opened. */
export interface RetainedBudget {
  /** Bytes the run handed on to be kept elsewhere (an upload, the plan's update). */
  charge(bytes: number): void;
  /**
   * `work` that reads the document's rows into the projection (a fill of rows on demand): what the
   * worker grows by while it runs is credited, up to the limit over the run (ADR 0481).
   */
  reading<T>(work: () => Promise<T>): Promise<T>;
  /** Whether the run retains more than its limit (confirmed after a collection). */
  over(): boolean;
  /** The failure a run over its limit ends with. */
  failure(): Error & { code: "memory_limit" };
}

export function retainedBudget(limitBytes: number): RetainedBudget {
  const loroAtOpen = loroBytes();
  const heapAtOpen = heapBytes();
  let charged = 0;
  let credited = 0;
  let exceeded = false;
  const retained = () =>
    loroBytes() - loroAtOpen + Math.max(0, heapBytes() - heapAtOpen) + charged - credited;
  return {
    charge(bytes) {
      charged += Math.max(0, bytes);
    },
    async reading(work) {
      const loro = loroBytes();
      const heap = heapBytes();
      try {
        return await work();
      } finally {
        const grown = loroBytes() - loro + Math.max(0, heapBytes() - heap);
        credited = Math.min(limitBytes, credited + grown);
      }
    },
    over() {
      if (exceeded) return true;
      if (retained() <= limitBytes) return false;
      collectGarbage();
      exceeded = retained() > limitBytes;
      return exceeded;
    },
    failure: () =>
      Object.assign(
        new Error(
          `the run's host work retained more than its limit of ${Math.round(limitBytes / 2 ** 20)} MiB (its plan, run document and uploads); nothing of it is kept`,
        ),
        { code: "memory_limit" as const },
      ),
  };
}
