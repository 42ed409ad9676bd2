/**
 * Sending a request again after a Tackle server refused it 429 (ADRs 0120, 0536). Durable's API and the
 * document server answer 429 only to a request they did not run or read: past a caller's requests or
 * streams in flight, before the body is read (ADRs 0118, 0482), or past durable's driving runs, before
 * anything is stored (ADR 0117). So any request refused so may be sent again. Nothing else is: not a
 * 5xx, not a network error (either may have run). At most `maxRetries` more sends, each after the
 * server's `Retry-After` (plus up to a quarter of it, drawn, so callers refused together come back
 * apart) or, without one, an equal-jitter exponential wait; never a wait that ends within 1 ms of the
 * call's deadline. Both packages' HTTP clients send through it.
 */

/** Sends after the first that a refused call makes by default (OpenAI's SDK makes 2). */
export const defaultMaxRetries = 2;

/**
 * The longest `Retry-After` the client waits out (a call's default time limit): a server asking for
 * longer is not sent to sooner than it asked; its refusal goes to the caller at once.
 */
export const retryAfterCapMs = 30_000;

/** Without `Retry-After`, the wait before retry k is drawn between half and all of min(cap, initial × 2^(k−1)). */
export const backoffInitialMs = 500;
export const backoffCapMs = 8_000;

/** `maxRetries` as given (checked), or the default. */
export function checkedMaxRetries(value: number | undefined): number {
  const chosen = value ?? defaultMaxRetries;
  if (!Number.isInteger(chosen) || chosen < 0) throw new RangeError("maxRetries must be an integer ≥ 0");
  return chosen;
}

/**
 * A `Retry-After` header in ms: delta-seconds (a decimal accepted) or an HTTP date (`nowEpochMs` the
 * wall clock); undefined when absent or unreadable.
 */
export function retryAfterMs(header: string | null, nowEpochMs: number): number | undefined {
  const value = header?.trim() ?? "";
  if (value === "") return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Number(value) * 1000;
  // A date names its day and month; `Date.parse` would also read "-1" or "7" as years.
  const at = /[a-z]/i.test(value) ? Date.parse(value) : Number.NaN;
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowEpochMs);
}

export interface RefusedRetryInput {
  readonly maxRetries: number;
  /** Which retry this would be: 1 for the first. */
  readonly retry: number;
  /** The refusal's `Retry-After` header. */
  readonly retryAfter: string | null;
  /** `now` and `deadline` on one monotonic clock (ms); `deadline` Infinity for a call without one. */
  readonly now: number;
  readonly deadline: number;
  readonly nowEpochMs: number;
  readonly random: () => number;
}

/**
 * How long to wait before sending a refused call again, or undefined when it is not sent again: its
 * retries are spent, the server asked for longer than `retryAfterCapMs`, or the wait would not leave
 * 1 ms of the deadline.
 */
export function refusedRetryDelay(input: RefusedRetryInput): number | undefined {
  if (input.retry > input.maxRetries) return undefined;
  const asked = retryAfterMs(input.retryAfter, input.nowEpochMs);
  let delay: number;
  if (asked === undefined) {
    const top = Math.min(backoffCapMs, backoffInitialMs * 2 ** (input.retry - 1));
    delay = top / 2 + input.random() * (top / 2);
  } else {
    if (asked > retryAfterCapMs) return undefined;
    delay = asked + input.random() * (asked / 4);
  }
  return input.deadline - (input.now + delay) >= 1 ? delay : undefined;
}

/** Time as the retries see it: the real clock in the client, a virtual one in the tests. */
export interface RetryClock {
  /** Monotonic ms. */
  now(): number;
  /** Wall-clock ms since the epoch (for a `Retry-After` date). */
  epochMs(): number;
  /** Resolves after `ms`, or at once when `signal` aborts. */
  sleep(ms: number, signal: AbortSignal | undefined): Promise<void>;
}

export const realClock: RetryClock = {
  now: () => performance.now(),
  epochMs: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve) => {
      if (signal?.aborted) return resolve();
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener("abort", done, { once: true });
    }),
};

/** An answer as the retries read it. */
export interface RefusableAnswer {
  readonly status: number;
  readonly retryAfter: string | null;
}

export interface RefusedRetry {
  readonly maxRetries: number;
  /** When the call's time limit is spent, on `clock`'s time (Infinity for none). */
  readonly deadline: number;
  /** The caller's signal: aborting it ends a wait at once. */
  readonly signal: AbortSignal | undefined;
  readonly clock: RetryClock;
  readonly random: () => number;
  /** The error a wait cut short by `signal` rejects with. */
  readonly aborted: () => unknown;
}

/**
 * Sends with `send` again while it answers 429, within the retries and the deadline. Answers the last
 * answer (a refusal when the retries stopped on one) and how many sends were made; an error `send`
 * throws is the caller's as it came, never sent again here.
 */
export async function sendRefusedAgain<Answer extends RefusableAnswer>(
  send: () => Promise<Answer>,
  retry: RefusedRetry,
): Promise<{ readonly answer: Answer; readonly sent: number }> {
  const { clock, signal } = retry;
  let answer = await send();
  let sent = 1;
  while (answer.status === 429) {
    const delay = refusedRetryDelay({
      maxRetries: retry.maxRetries,
      retry: sent,
      retryAfter: answer.retryAfter,
      now: clock.now(),
      deadline: retry.deadline,
      nowEpochMs: clock.epochMs(),
      random: retry.random,
    });
    if (delay === undefined) break;
    await clock.sleep(delay, signal);
    if (signal?.aborted) throw retry.aborted();
    // The timer may have fired late: what is left is read again.
    if (!(retry.deadline - clock.now() >= 1)) break;
    answer = await send();
    sent += 1;
  }
  return { answer, sent };
}
