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
  /**
   * Tries in all, the first included (default 3, as LangGraph's `RetryPolicy`; 1 means no retry). A
   * crash-window re-run counts as a try.
   */
  readonly attempts?: number;
  /** The wait before try n + 1, from try n: data, or a function of the attempt that failed. */
  readonly backoff?: Backoff | ((attempt: number) => number);
  /**
   * How much of each wait is random: the wait is drawn uniformly from `[delay × (1 − jitter), delay]`, so
   * steps that failed together do not retry together. 0 to 1; default 0.5; not applied to a backoff
   * function.
   */
  readonly jitter?: number;
  /**
   * Codes and HTTP statuses never retried, matched against the error's `code`, `status` or
   * `statusCode`. Default `defaultNonRetryable` (input refused, 4xx other than 408/425/429, and the
   * runner's own errors a retry cannot mend). An error passed through `nonRetryable()` is never retried.
   */
  readonly nonRetryable?: readonly (string | number)[];
  /**
   * Narrows what is retried: a predicate, or codes and HTTP statuses. Default: every error that is not
   * non-retryable (as Temporal's retry policy).
   */
  readonly retryOn?: ((error: unknown) => boolean) | readonly (string | number)[];
}

/** What a retry policy never retries unless its `nonRetryable` says otherwise. */
export const defaultNonRetryable: readonly (string | number)[] = Object.freeze([
  "invalid_input",
  "unknown_tool",
  "journal_mismatch",
  "journal_decode_failed",
  "not_serializable",
  "invalid_policy",
  "invalid_context",
  "duplicate_interrupt",
  "run_cancelled",
  "run_fenced",
  400,
  401,
  403,
  404,
  405,
  409,
  410,
  422,
]);

const nonRetryableMark = Symbol.for("tackle.durable.non-retryable");

/**
 * Marks an error as one no retry can mend (a card declined, an order that does not exist): a step's
 * retry policy fails the step at once. Returns the error, so `throw nonRetryable(error)` reads as it does.
 */
export function nonRetryable<E>(error: E): E {
  if (typeof error === "object" && error !== null) {
    Object.defineProperty(error, nonRetryableMark, { value: true, enumerable: false, configurable: true });
  }
  return error;
}

export interface StepOptions {
  readonly retry?: RetryPolicy;
  /** Longest one try may take: then its signal aborts and the try fails with `step_timeout` (retryable). */
  readonly timeoutMs?: number;
}

/** Checks a policy's shape; throws `invalid_policy` naming the field. */
export function checkStepOptions(options: StepOptions | undefined, label: string): void {
  if (options === undefined) return;
  const { retry, timeoutMs } = options;
  if (timeoutMs !== undefined && !(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new DurableError("invalid_policy", `${label}: timeoutMs is a positive number of milliseconds`);
  }
  if (retry === undefined) return;
  if (
    retry.attempts !== undefined &&
    (!Number.isSafeInteger(retry.attempts) || retry.attempts < 1 || retry.attempts > 100)
  ) {
    throw new DurableError("invalid_policy", `${label}: retry.attempts is a whole number from 1 to 100`);
  }
  if (
    retry.jitter !== undefined &&
    !(Number.isFinite(retry.jitter) && retry.jitter >= 0 && retry.jitter <= 1)
  ) {
    throw new DurableError("invalid_policy", `${label}: retry.jitter is a number from 0 to 1`);
  }
  const codes = retry.nonRetryable;
  if (
    codes !== undefined &&
    !(Array.isArray(codes) && codes.every((entry) => typeof entry === "string" || typeof entry === "number"))
  ) {
    throw new DurableError("invalid_policy", `${label}: retry.nonRetryable is a list of codes and statuses`);
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

/** Tries in all under a policy (3 when it does not say). */
export function attemptsOf(retry: RetryPolicy): number {
  return retry.attempts ?? 3;
}

/** The wait after try `failedAttempt` failed: the backoff, less up to `jitter` of it at random. */
export function delayBefore(
  retry: RetryPolicy,
  failedAttempt: number,
  random: () => number = Math.random,
): number {
  const backoff = retry.backoff;
  if (typeof backoff === "function") return Math.max(0, backoff(failedAttempt));
  const initial = backoff?.initialMs ?? 200;
  const factor = backoff?.factor ?? 2;
  const max = backoff?.maxMs ?? 30_000;
  const delay = Math.min(max, initial * factor ** (failedAttempt - 1));
  const jitter = retry.jitter ?? 0.5;
  return Math.round(delay * (1 - jitter * random()));
}

export function worthRetrying(retry: RetryPolicy, error: unknown): boolean {
  if (typeof error === "object" && error !== null && nonRetryableMark in error) return false;
  const fields = error as { code?: unknown; status?: unknown; statusCode?: unknown } | null | undefined;
  const marks = [fields?.code, fields?.status, fields?.statusCode].filter((mark) => mark !== undefined);
  const never = retry.nonRetryable ?? defaultNonRetryable;
  if (marks.some((mark) => never.includes(mark as string | number))) return false;
  const retryOn = retry.retryOn;
  if (typeof retryOn === "function") return retryOn(error);
  if (retryOn !== undefined) return marks.some((mark) => retryOn.includes(mark as string | number));
  return true;
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
