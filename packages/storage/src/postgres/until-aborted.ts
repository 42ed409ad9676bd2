/** A wait that a caller's abort signal ends at once, for the waits `pg` cannot cancel (a connect, a query). */
import type pg from "pg";

/** `work`, or a rejection with the signal's reason as soon as `signal` aborts (the work ends on its own). */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return work;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/**
 * A client from `pool`, or `aborted()` thrown as soon as `signal` aborts; a connection that arrives
 * after the abort goes back to the pool unused.
 */
export async function connectUntilAborted(
  pool: pg.Pool,
  signal: AbortSignal | undefined,
  aborted: () => Error,
): Promise<pg.PoolClient> {
  if (signal?.aborted) throw aborted();
  const connecting = pool.connect();
  return untilAborted(connecting, signal).catch((error: unknown) => {
    if (signal?.aborted)
      connecting.then(
        (late) => late.release(),
        () => undefined,
      );
    throw signal?.aborted ? aborted() : error;
  });
}
