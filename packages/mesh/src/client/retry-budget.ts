/**
 * How many refused calls one client may send again across its calls to one module (ADRs 0216, 0217):
 * Finagle's retry budget, one per module the client calls (`module-budgets.ts`). Each call sent earns
 * `ratio` of a retry and the budget earns `minRetriesPerSecond` a second besides; both are spent
 * within `windowMs`, after which they lapse. A client that floods a full module then adds at most
 * `ratio` of its calls as retries (plus the floor),
 * not `attempts − 1` retries per call; one refused now and then still gets every retry its policy gives.
 */

/** The budget a client's retries of its calls to one module come out of (one per module). */
export interface RetryBudgetOptions {
  /** Retries earned by each call sent within the window: 0.2 (the default) is one for every five calls. */
  readonly ratio?: number;
  /**
   * Retries earned each second besides, so that a client sending few calls still retries them.
   * Default 10 (100 over the default window).
   */
  readonly minRetriesPerSecond?: number;
  /** How long a call sent and a retry count against the budget (ms). Default 10,000. */
  readonly windowMs?: number;
}

export type RetryBudgetPolicy = Readonly<Required<RetryBudgetOptions>>;

export const defaultRetryBudget: RetryBudgetPolicy = Object.freeze({
  ratio: 0.2,
  minRetriesPerSecond: 10,
  windowMs: 10_000,
});

/** The window is counted in this many slots: what lapses, lapses a slot at a time. */
export const budgetSlots = 10;

/** The budget the options ask for (checked), or undefined for `false` (retries are not budgeted). */
export function retryBudgetPolicy(
  options: RetryBudgetOptions | false | undefined,
): RetryBudgetPolicy | undefined {
  if (options === false) return undefined;
  const defined = Object.entries(options ?? {}).filter(([, value]) => value !== undefined);
  const chosen = { ...defaultRetryBudget, ...Object.fromEntries(defined) } as RetryBudgetPolicy;
  for (const name of ["ratio", "minRetriesPerSecond"] as const) {
    if (!Number.isFinite(chosen[name]) || chosen[name] < 0)
      throw new RangeError(`retryOverloaded.budget.${name} must be a finite number ≥ 0`);
  }
  if (!Number.isFinite(chosen.windowMs) || chosen.windowMs < budgetSlots)
    throw new RangeError(`retryOverloaded.budget.windowMs must be a finite number ≥ ${budgetSlots}`);
  return Object.freeze(chosen);
}

/** Retries the floor gives over one window. */
export function budgetReserve(policy: RetryBudgetPolicy): number {
  return (policy.minRetriesPerSecond * policy.windowMs) / 1000;
}

/** A budget as a call uses it; `now` is on the retries' clock (milliseconds, never going back). */
export interface RetryBudget {
  /** A call's first send left: it earns `ratio` of a retry. */
  sent(now: number): void;
  /** Whether one more retry fits in what the window earned. */
  allows(now: number): boolean;
  /** A retry left (after `allows` said yes, with no wait between). */
  spend(now: number): void;
}

/** One budget over its window, as a module's (ADR 0217). */
export interface WindowedBudget extends RetryBudget {
  /** True when nothing sent or retried is left in the window at `now`: it answers as a new budget. */
  idle(now: number): boolean;
}

/**
 * The window is the slot `now` falls in and the nine before it, so it reaches between 9/10 and all of
 * `windowMs` back; counting by slot keeps the budget to twenty numbers however many calls it sees.
 */
export function createRetryBudget(policy: RetryBudgetPolicy): WindowedBudget {
  const slotMs = policy.windowMs / budgetSlots;
  const reserve = budgetReserve(policy);
  const sentIn = new Array<number>(budgetSlots).fill(0);
  const spentIn = new Array<number>(budgetSlots).fill(0);
  let sent = 0;
  let spent = 0;
  let slot = Number.NEGATIVE_INFINITY;
  /** Moves the window to `now`'s slot, emptying the slots it leaves behind. */
  const advance = (now: number): number => {
    const current = Math.floor(now / slotMs);
    if (current > slot) {
      const lapsed = Math.min(budgetSlots, current - slot);
      for (let step = lapsed - 1; step >= 0; step -= 1) {
        const index = (((current - step) % budgetSlots) + budgetSlots) % budgetSlots;
        sent -= sentIn[index] as number;
        spent -= spentIn[index] as number;
        sentIn[index] = 0;
        spentIn[index] = 0;
      }
      slot = current;
    }
    return ((slot % budgetSlots) + budgetSlots) % budgetSlots;
  };
  return {
    sent(now) {
      const index = advance(now);
      sentIn[index] = (sentIn[index] as number) + 1;
      sent += 1;
    },
    allows(now) {
      advance(now);
      // A hair of slack so that five calls at 0.2 earn a whole retry despite binary fractions.
      return spent + 1 <= policy.ratio * sent + reserve + 1e-9;
    },
    spend(now) {
      const index = advance(now);
      spentIn[index] = (spentIn[index] as number) + 1;
      spent += 1;
    },
    idle(now) {
      advance(now);
      return sent === 0 && spent === 0;
    },
  };
}
