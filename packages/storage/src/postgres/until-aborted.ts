/** A wait that a caller's abort signal ends at once, for the waits `pg` cannot cancel (a connect, a query). */

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
