/** Step policies: how often a step is tried, how long to wait between tries, how long one try may take. */
import { DurableError } from "../errors/durable-error.ts";

/** Exponential backoff as plain data: `initialMs × factor^(attempt − 1)`, capped at `maxMs`. */
export interface Backoff {
  /** Default 200 ms. */
  readonly initialMs?: number;
  /** Default 2. */
  readonly factor?: number;
  /** Default 30 s. */
  readonly maxMs?: number;
}

export interface RetryPolicy {
  /** Tries in all, the first included (default 1: no retry). A crash-window re-run counts as a try. */
  readonly attempts: number;
  /** The wait before try n + 1, from try n: data, or a function of the attempt that failed. */
  readonly backoff?: Backoff | ((attempt: number) => number);
  /**
   * Which errors are worth another try: a predicate, or codes and HTTP statuses matched against the
   * error's `code`, `status` or `statusCode`. Default: errors marked `retryable`, step timeouts,
   * HTTP 408/425/429/500/502/503/504 and the usual transient network codes.
   */
  readonly retryOn?: ((error: unknown) => boolean) | readonly (string | number)[];
}

export interface StepOptions {
  readonly retry?: RetryPolicy;
  /** Longest one try may take: then its signal aborts and the try fails with `step_timeout` (retryable). */
  readonly timeoutMs?: number;
}

const transientStatuses = new Set([408, 425, 429, 500, 502, 503, 504]);
const transientCodes = new Set([
  "step_timeout",
  "ECONNRESET",
  "ECONNREFUSED",
  "ETIMEDOUT",
  "EPIPE",
  "EAI_AGAIN",
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
]);

/** Checks a policy's shape; throws `invalid_policy` naming the field. */
export function checkStepOptions(options: StepOptions | undefined, label: string): void {
  if (options === undefined) return;
  const { retry, timeoutMs } = options;
  if (timeoutMs !== undefined && !(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new DurableError("invalid_policy", `${label}: timeoutMs is a positive number of milliseconds`);
  }
  if (retry === undefined) return;
  if (!Number.isSafeInteger(retry.attempts) || retry.attempts < 1 || retry.attempts > 100) {
    throw new DurableError("invalid_policy", `${label}: retry.attempts is a whole number from 1 to 100`);
  }
  const backoff = retry.backoff;
  if (backoff !== undefined && typeof backoff !== "function") {
    for (const field of ["initialMs", "factor", "maxMs"] as const) {
      const value = backoff[field];
      if (value !== undefined && !(Number.isFinite(value) && value >= 0)) {
        throw new DurableError("invalid_policy", `${label}: retry.backoff.${field} is a number ≥ 0`);
      }
    }
  }
  const retryOn = retry.retryOn;
  if (
    retryOn !== undefined &&
    typeof retryOn !== "function" &&
    !(
      Array.isArray(retryOn) &&
      retryOn.every((entry) => typeof entry === "string" || typeof entry === "number")
    )
  ) {
    throw new DurableError(
      "invalid_policy",
      `${label}: retry.retryOn is a predicate or a list of codes and statuses`,
    );
  }
}

export function delayBefore(retry: RetryPolicy, failedAttempt: number): number {
  const backoff = retry.backoff;
  if (typeof backoff === "function") return Math.max(0, backoff(failedAttempt));
  const initial = backoff?.initialMs ?? 200;
  const factor = backoff?.factor ?? 2;
  const max = backoff?.maxMs ?? 30_000;
  return Math.min(max, initial * factor ** (failedAttempt - 1));
}

export function worthRetrying(retry: RetryPolicy, error: unknown): boolean {
  const retryOn = retry.retryOn;
  if (typeof retryOn === "function") return retryOn(error);
  const fields = error as { code?: unknown; status?: unknown; statusCode?: unknown; retryable?: unknown };
  const marks = [fields?.code, fields?.status, fields?.statusCode].filter((mark) => mark !== undefined);
  if (retryOn !== undefined) return marks.some((mark) => retryOn.includes(mark as string | number));
  if (fields?.retryable === true) return true;
  return marks.some(
    (mark) => (typeof mark === "number" && transientStatuses.has(mark)) || transientCodes.has(String(mark)),
  );
}

/**
 * Runs one try of `fn` with its own signal: aborted when the node's signal aborts (a pause, a cancel)
 * or when `timeoutMs` passes, in which case the try fails with `step_timeout`.
 */
export async function runTry<T>(
  fn: (signal: AbortSignal) => T | Promise<T>,
  parent: AbortSignal,
  timeoutMs: number | undefined,
  label: string,
): Promise<T> {
  const controller = new AbortController();
  const forward = () => controller.abort(parent.reason);
  if (parent.aborted) forward();
  else parent.addEventListener("abort", forward, { once: true });
  let timer: NodeJS.Timeout | undefined;
  try {
    const running = (async () => fn(controller.signal))();
    if (timeoutMs === undefined) return await running;
    // The try goes on in the background if it ignores its signal; its late outcome is dropped.
    running.catch(() => {});
    const timedOut = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        const error = new DurableError("step_timeout", `${label} timed out after ${timeoutMs} ms`, {
          retryable: true,
          data: { timeoutMs },
        });
        controller.abort(error);
        reject(error);
      }, timeoutMs);
    });
    return await Promise.race([running, timedOut]);
  } finally {
    clearTimeout(timer);
    parent.removeEventListener("abort", forward);
  }
}

/** Waits `ms`, or rejects with the signal's reason when it aborts first. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const done = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", done);
      resolve();
    }, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
