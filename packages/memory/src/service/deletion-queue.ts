/**
 * Retention's deletions (ADR 0537), off the answers that set them off: each runs after the caller's
 * unit of work commits, one of a kind at a time with the next one asked for queued behind it, in
 * batches with the store's other calls between them; failures are logged.
 */
import { setImmediate as yieldToRequests } from "node:timers/promises";
import type { Logger } from "@tackle/core";
import type { MemoryStore } from "../store/memory-store.ts";

/** Rows one statement deletes at most; between batches the store serves other calls. */
export const batchRows = 1_000;

export interface DeletionQueue {
  /**
   * Runs `work` once the caller's unit of work (if any) has committed, off its async context (not at
   * all if it rolls back: a later insert sets it off again); after the running one of its `key`.
   */
  later(what: string, key: string, work: () => Promise<number>): void;
  /** Runs `step` (one batch) until it deletes fewer than `batchRows`, or the queue closes; answers the total. */
  drain(step: () => Promise<number>): Promise<number>;
  /** True once `close` began: nothing new is asked for. */
  readonly closing: boolean;
  /** Lets the deletions set off just before start, waits for them and their queued ones, each ending after its current batch. */
  close(): Promise<void>;
}

export function createDeletionQueue(store: MemoryStore, logger: Logger): DeletionQueue {
  const busy = new Set<string>();
  const next = new Map<string, { what: string; work: () => Promise<number> }>();
  const running = new Set<Promise<void>>();
  let closing = false;
  let closed = false;

  function start(what: string, key: string, work: () => Promise<number>): void {
    if (closed) return;
    if (busy.has(key)) {
      next.set(key, { what, work });
      return;
    }
    busy.add(key);
    const task = work()
      .then(
        (deleted) => logger.debug(`memory retention: ${what}`, { deleted }),
        (error: unknown) =>
          logger.warn(`memory retention: ${what} failed`, { error: (error as Error)?.message }),
      )
      .finally(() => {
        busy.delete(key);
        running.delete(task);
        const queued = next.get(key);
        next.delete(key);
        if (queued) start(queued.what, key, queued.work);
      });
    running.add(task);
  }

  return {
    later(what, key, work) {
      store.afterCommit(() => start(what, key, work));
    },
    async drain(step) {
      let total = 0;
      for (;;) {
        const deleted = await step();
        total += deleted;
        if (deleted < batchRows || closing) return total;
        await yieldToRequests();
      }
    },
    get closing() {
      return closing;
    },
    async close() {
      closing = true;
      await yieldToRequests();
      while (running.size > 0) await Promise.allSettled([...running]);
      closed = true;
    },
  };
}
