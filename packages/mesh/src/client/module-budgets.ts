/**
 * A client's retry budgets, one per module it calls (ADR 0217), so that a flood one module refuses
 * spends that module's retries and not those of calls to other modules. A module is known by its
 * prefix on the bus (its tools and seats answer under it). At most `cap` modules have a budget of their
 * own: one is dropped only once it is idle (nothing sent or retried within its window); idle, it
 * answers as a new one would, so dropping it changes no answer. Past the cap, with none idle, a
 * module's calls share one budget with the other modules past it (ADR 0216's budget, for them).
 */
import {
  createRetryBudget,
  type RetryBudget,
  type RetryBudgetPolicy,
  type WindowedBudget,
} from "./retry-budget.ts";

/** Modules with a budget of their own, at most: 1,024 budgets of twenty numbers each. */
export const maxModuleBudgets = 1_024;

export interface ModuleBudgets {
  /**
   * The budget of the module at `prefix`: each use finds the module's budget as it is then (its own,
   * a new one, or the shared one past the cap), so a call's retries count where its module's do.
   */
  of(prefix: string): RetryBudget;
  /** How many modules have a budget of their own now (at most the cap). */
  ownBudgets(): number;
}

/**
 * The budgets for `policy`, at most `cap` of them a module's own; `create` makes each one (the tests
 * log them). A module gets its budget with its first call sent or retry, and the modules are kept in
 * the order of their last one, so the first is the one whose window lapses first: when it is not idle,
 * none is.
 */
export function createModuleBudgets(
  policy: RetryBudgetPolicy,
  cap: number = maxModuleBudgets,
  create: (policy: RetryBudgetPolicy) => WindowedBudget = createRetryBudget,
): ModuleBudgets {
  if (!Number.isInteger(cap) || cap < 1)
    throw new RangeError("the module budgets' cap must be an integer ≥ 1");
  const own = new Map<string, WindowedBudget>();
  let shared: WindowedBudget | undefined;
  /** A budget nothing is ever counted in: what a module without one yet is allowed. */
  let blank: WindowedBudget | undefined;
  /** Whether a module may have a budget of its own at `now`: a place is free, or the first is idle. */
  const roomAt = (now: number): boolean => {
    if (own.size < cap) return true;
    const [oldest, budget] = own.entries().next().value as [string, WindowedBudget];
    if (!budget.idle(now)) return false;
    // Idle, it is the same as a new budget: dropping it changes no answer.
    own.delete(oldest);
    return true;
  };
  /** Where the module's call sent or retry at `now` is counted, the module moved to the end. */
  const countIn = (prefix: string, now: number): WindowedBudget => {
    const kept = own.get(prefix);
    if (kept !== undefined) {
      own.delete(prefix);
      own.set(prefix, kept);
      return kept;
    }
    if (!roomAt(now)) {
      shared ??= create(policy);
      return shared;
    }
    const fresh = create(policy);
    own.set(prefix, fresh);
    return fresh;
  };
  const allowedBy = (prefix: string, now: number): WindowedBudget => {
    const kept = own.get(prefix);
    if (kept !== undefined) return kept;
    if (roomAt(now)) {
      blank ??= create(policy);
      return blank;
    }
    shared ??= create(policy);
    return shared;
  };
  return {
    of: (prefix) => ({
      sent: (now) => countIn(prefix, now).sent(now),
      allows: (now) => allowedBy(prefix, now).allows(now),
      spend: (now) => countIn(prefix, now).spend(now),
    }),
    ownBudgets: () => own.size,
  };
}
