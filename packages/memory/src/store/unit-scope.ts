/** Which unit of work (one store transaction around several calls) the running async context is in. */
import { AsyncLocalStorage } from "node:async_hooks";

export interface Unit {
  /** Set once the unit committed or rolled back: calls from contexts it started then run outside it. */
  done: boolean;
  readonly afterCommit: (() => void)[];
}

export function createUnitScope<U extends Unit>() {
  const storage = new AsyncLocalStorage<U>();
  return {
    /** The open unit the caller is in, if any. */
    active(): U | undefined {
      const unit = storage.getStore();
      return unit === undefined || unit.done ? undefined : unit;
    },
    run<T>(unit: U, body: () => Promise<T>): Promise<T> {
      return storage.run(unit, body);
    },
    afterCommit(callback: () => void): void {
      const unit = storage.getStore();
      if (unit !== undefined && !unit.done) unit.afterCommit.push(callback);
      else storage.exit(() => setImmediate(callback));
    },
    /** Ends the unit; after a commit, its callbacks run outside it. */
    finish(unit: U, committed: boolean): void {
      unit.done = true;
      if (!committed) return;
      for (const callback of unit.afterCommit.splice(0)) storage.exit(() => setImmediate(callback));
    },
  };
}
