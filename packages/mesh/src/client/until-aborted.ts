/** A wait that a caller's abort signal ends at once: what a client wait that nats.js cannot cancel needs. */
import { ToolAbortedError } from "@tackle/core";

/**
 * `work`, or a rejection with `aborted` (naming `name`) as soon as `signal` aborts. The work itself is
 * left to end by its own deadline; its outcome is then ignored.
 */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal | undefined, name: string): Promise<T> {
  if (signal === undefined) return work;
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.reject(new ToolAbortedError(name, signal.reason));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new ToolAbortedError(name, signal.reason));
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
