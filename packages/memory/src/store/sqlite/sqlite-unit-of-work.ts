/**
 * Units of work on the SQLite store's one connection: a unit's transaction begins (BEGIN IMMEDIATE)
 * at its first write and holds the connection until it ends; calls from outside it wait meanwhile,
 * so they never join its transaction nor read what it has not committed.
 */
import type { DatabaseSync } from "node:sqlite";
import type { MemoryStore } from "../memory-store.ts";
import { createUnitScope, type Unit } from "../unit-scope.ts";

type Method = (...parameters: never[]) => Promise<unknown>;

export function withSqliteUnitsOfWork(
  database: DatabaseSync,
  store: Omit<MemoryStore, "withTransaction" | "afterCommit">,
  writes: ReadonlySet<string>,
): MemoryStore {
  const scope = createUnitScope<Unit>();
  let holder: Unit | undefined;
  let released: Promise<void> = Promise.resolve();
  let release: () => void = () => {};

  // Each wait re-checks `holder` after every await and acts in the same turn it finds it free, so
  // no other unit can begin in between.
  function gate(name: string, method: Method): Method {
    const write = writes.has(name);
    return async (...parameters) => {
      const unit = scope.active();
      if (unit === undefined || unit !== holder) {
        while (holder !== undefined) await released;
        if (unit !== undefined && write) {
          holder = unit;
          released = new Promise((resolve) => {
            release = resolve;
          });
          database.exec("BEGIN IMMEDIATE");
        }
      }
      return method(...parameters);
    };
  }

  const gated = Object.fromEntries(
    Object.entries(store).map(([name, value]) => [
      name,
      typeof value === "function" ? gate(name, value as Method) : value,
    ]),
  ) as unknown as Omit<MemoryStore, "withTransaction" | "afterCommit">;

  return {
    ...gated,
    async withTransaction(body) {
      if (scope.active() !== undefined) return body();
      const unit: Unit = { done: false, afterCommit: [] };
      let committed = false;
      try {
        const result = await scope.run(unit, body);
        if (holder === unit) database.exec("COMMIT");
        committed = true;
        return result;
      } finally {
        if (holder === unit) {
          if (!committed && database.isTransaction) database.exec("ROLLBACK");
          holder = undefined;
          release();
        }
        scope.finish(unit, committed);
      }
    },
    afterCommit: scope.afterCommit,
  };
}
