/**
 * Both database stores' one policy for a database that failed under a call (ADR 0129, ADR 0130): its
 * transient error (`isTransientDatabaseError` of `@tackle/storage`: a PostgreSQL connection lost or
 * refused, a session ended, a deadlock victim; a SQLite file whose write lock another connection held
 * past the busy timeout, `lock_timeout`) is thrown as `DurableError` `unavailable`, retryable, the
 * driver's error its cause. The runner leaves a run whose write met one to a takeover after its lease
 * rather than record a failure the database caused, and a caller is told a typed, retryable error.
 */
import { isTransientDatabaseError } from "@tackle/storage";
import { DurableError } from "../errors/durable-error.ts";
import type { DurableStore } from "../store/durable-store.ts";

/** `store` with every call but `close` answering a transient database error as `unavailable(message)`. */
export function typedFailures(store: DurableStore, message: string): DurableStore {
  const typed = {} as Record<string, unknown>;
  for (const [name, method] of Object.entries(store)) {
    typed[name] =
      name === "close"
        ? method
        : async (...args: unknown[]) => {
            try {
              return await (method as (...parameters: unknown[]) => Promise<unknown>)(...args);
            } catch (error) {
              throw unavailable(error, message);
            }
          };
  }
  return typed as unknown as DurableStore;
}

function unavailable(error: unknown, message: string): unknown {
  if (DurableError.isInstance(error) || !isTransientDatabaseError(error)) return error;
  return new DurableError("unavailable", message, { retryable: true, cause: error });
}
