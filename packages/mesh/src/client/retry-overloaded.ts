/**
 * Sending a call again after a node refused it `overloaded` (ADR 0215). A node refuses a call past its
 * module's running and waiting calls before it reads the arguments (ADR 0214), so the call never
 * started and sending it again is safe: the next send may reach another node of the module's queue
 * group, or the same one once it has room. Only that refusal is sent again, never another error (a
 * `tool_failed` or a `timeout` may have run), never past the caller's deadline, at most `attempts`
 * sends in all, with a jittered exponential wait between them, and only while the client's retry
 * budget for the call's module has room (ADRs 0216, 0217).
 */
import { ToolAbortedError, type ToolCallResult, ToolError } from "@tackle/core";
import type { RetryClock as CoreRetryClock } from "@tackle/core/internal";
import {
  defaultRetryBudget,
  type RetryBudget,
  type RetryBudgetOptions,
  type RetryBudgetPolicy,
  retryBudgetPolicy,
} from "./retry-budget.ts";

/** How the client sends again a call a node refused `overloaded` before running it. */
export interface RetryOverloadedOptions {
  /** Sends in all, the first one included (1 never sends again). Default 6. */
  readonly attempts?: number;
  /**
   * The wait before the first retry is drawn between half this and this (ms); each later wait's range
   * doubles. Default 10.
   */
  readonly initialDelayMs?: number;
  /** The most a wait's range grows to (ms): a wait is then between half this and this. Default 250. */
  readonly maxDelayMs?: number;
  /**
   * What the client's retries of its calls to one module may add up to (ADRs 0216, 0217; one budget
   * per module): by default 20% of the calls it sent the module plus 10 a second, within 10 s.
   * `false` leaves them unbudgeted (each call alone bounded by `attempts`).
   */
  readonly budget?: RetryBudgetOptions | false;
}

export interface RetryPolicy {
  readonly attempts: number;
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
  /** Undefined when the retries are not budgeted. */
  readonly budget: RetryBudgetPolicy | undefined;
}

export const defaultRetryOverloaded: RetryPolicy = Object.freeze({
  attempts: 6,
  initialDelayMs: 10,
  maxDelayMs: 250,
  budget: defaultRetryBudget,
});

/** The policy the options ask for (checked), or undefined for `false` (never send again). */
export function retryPolicy(options: RetryOverloadedOptions | false | undefined): RetryPolicy | undefined {
  if (options === false) return undefined;
  const { budget, ...rest } = options ?? {};
  const chosen = { ...defaultRetryOverloaded, ...definedOnly(rest), budget: retryBudgetPolicy(budget) };
  if (!Number.isInteger(chosen.attempts) || chosen.attempts < 1)
    throw new RangeError("retryOverloaded.attempts must be an integer ≥ 1");
  for (const name of ["initialDelayMs", "maxDelayMs"] as const) {
    if (!Number.isFinite(chosen[name]) || chosen[name] < 0)
      throw new RangeError(`retryOverloaded.${name} must be a finite number ≥ 0`);
  }
  return Object.freeze(chosen);
}

function definedOnly(
  options: Omit<RetryOverloadedOptions, "budget">,
): Omit<RetryOverloadedOptions, "budget"> {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined));
}

/** Refusals a node answered before running the call (it said so in `Tackle-Not-Run`). */
const refusedBeforeRun = new WeakSet<ToolError>();

/** Marks `error` as a node's refusal before the call ran: only such an `overloaded` is sent again. */
export function markRefusedBeforeRun(error: ToolError): void {
  refusedBeforeRun.add(error);
}

/** True for an `overloaded` a node answered before it read the call (not a tool's own `overloaded`). */
export function isRetryableRefusal(error: ToolError): boolean {
  return error.code === "overloaded" && refusedBeforeRun.has(error);
}

/**
 * The wait before retry number `retry` (1 for the first): its range's top doubles from
 * `initialDelayMs` up to `maxDelayMs`, and the wait is drawn between half the top and the top
 * ("equal jitter": never nothing, so a node gets a moment to free a place).
 */
export function backoffMs(policy: RetryPolicy, retry: number, random: () => number): number {
  const top = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** (retry - 1));
  return top / 2 + random() * (top / 2);
}

/**
 * After `sent` sends whose last was refused at `now`: how long to wait before sending again, or
 * undefined when the sends are spent or the wait would leave less than 1 ms of the deadline.
 */
export function nextRetryDelay(
  policy: RetryPolicy,
  sent: number,
  now: number,
  deadline: number,
  random: () => number,
): number | undefined {
  if (sent >= policy.attempts) return undefined;
  const delay = backoffMs(policy, sent, random);
  return Math.floor(deadline - (now + delay)) >= 1 ? delay : undefined;
}

/**
 * Time as the retries see it: core's `realClock` (`@tackle/core/internal`) in the client, a virtual one
 * in the tests. Its `sleep` resolves at once when the signal has aborted, before or during the wait.
 */
export type RetryClock = Pick<CoreRetryClock, "now" | "sleep">;

export interface RetriedCall {
  readonly policy: RetryPolicy;
  /** When the caller's time limit is spent, on `clock`'s time (Infinity for none). */
  readonly deadline: number;
  readonly name: string;
  readonly signal: AbortSignal | undefined;
  readonly clock: RetryClock;
  readonly random: () => number;
  /** The budget of the call's module (the call's first send already counted), if it has one. */
  readonly budget: RetryBudget | undefined;
  /** Sends the call again with a time limit of `timeoutMs`; undefined when it cannot be sent now. */
  send(timeoutMs: number): Promise<ToolCallResult> | undefined;
}

/**
 * Sends the call again while a node refuses it `overloaded` before running it, within the policy, the
 * deadline and the module's budget; `first` is the first send's answer. Any other answer is the
 * caller's as it came; when the sends stop on a refusal, the caller gets the last one with
 * `data.attempts` (how many were sent) and, stopped by the budget, `data.retryBudgetSpent`.
 */
export async function retryOverloaded(first: ToolCallResult, call: RetriedCall): Promise<ToolCallResult> {
  const { policy, deadline, clock, signal, budget } = call;
  let last = first;
  let sent = 1;
  while (!last.ok && isRetryableRefusal(last.error)) {
    const delay = nextRetryDelay(policy, sent, clock.now(), deadline, call.random);
    if (delay === undefined)
      return refusedAfter(last.error, sent, sent >= policy.attempts ? "attempts" : "deadline");
    // Spent: the refusal is the caller's at once, not after a wait.
    if (budget !== undefined && !budget.allows(clock.now())) return refusedAfter(last.error, sent, "budget");
    await clock.sleep(delay, signal);
    if (signal?.aborted) return { ok: false, error: new ToolAbortedError(call.name, signal.reason) };
    // The timer may have fired late: what is left is read again.
    const now = clock.now();
    const left = Math.floor(deadline - now);
    if (!(left >= 1)) return refusedAfter(last.error, sent, "deadline");
    // Other calls may have spent the budget during the wait.
    if (budget !== undefined && !budget.allows(now)) return refusedAfter(last.error, sent, "budget");
    // Spent as it leaves (or finds the client not connected: a retry's worth the budget can spare).
    budget?.spend(now);
    const next = call.send(left);
    if (next === undefined) return refusedAfter(last.error, sent, "unsent");
    last = await next;
    sent += 1;
  }
  return last;
}

/** The last refusal, saying how many sends were refused and why the client stopped. */
function refusedAfter(
  error: ToolError,
  attempts: number,
  stopped: "attempts" | "deadline" | "unsent" | "budget",
): ToolCallResult {
  const data = typeof error.data === "object" && error.data !== null ? error.data : {};
  const why = {
    attempts: "the client's attempts are spent",
    deadline: "its time limit leaves no room to send it again",
    unsent: "the client is not connected to send it again",
    budget:
      "the client's retry budget for the module is spent: its calls to the module are refused more often than it may send them again",
  }[stopped];
  return {
    ok: false,
    error: new ToolError(error.code, `${error.message} (refused ${attempts} times; ${why})`, {
      retryable: true,
      data: stopped === "budget" ? { ...data, attempts, retryBudgetSpent: true } : { ...data, attempts },
    }),
  };
}
