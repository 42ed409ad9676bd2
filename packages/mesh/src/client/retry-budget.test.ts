/**
 * The client's retry budget (ADR 0216) on a virtual clock. Many calls of one client at once, through
 * 1,000 random schedules of starts, answers, durations, limits and budgets: the retries never pass the
 * budget's bound, and the budget only ever stops a call short, where it said no — every other call
 * sends and gets exactly what it would without a budget. One call of an idle client gets all six sends
 * of the default policy, and so does one a window after a flood spent the budget.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type ToolCallResult, ToolError } from "@tackle/core";
import { seededRandom } from "@tackle/test-support";
import { assertWithinBudget, type BudgetLog, logged } from "./fixtures/budget-log.ts";
import { createModuleBudgets, maxModuleBudgets } from "./module-budgets.ts";
import {
  budgetReserve,
  createRetryBudget,
  defaultRetryBudget,
  type RetryBudget,
  type RetryBudgetPolicy,
  retryBudgetPolicy,
} from "./retry-budget.ts";
import {
  defaultRetryOverloaded,
  markRefusedBeforeRun,
  type RetryClock,
  type RetryPolicy,
  retryOverloaded,
  retryPolicy,
} from "./retry-overloaded.ts";

/**
 * Virtual time for many calls at once: timers fire in time order (then in the order they were set),
 * each once the calls woken before it have gone as far as they can.
 */
function virtualTime() {
  let now = 0;
  let order = 0;
  const timers: { at: number; order: number; fire: () => void }[] = [];
  const after = (ms: number, fire: () => void) => timers.push({ at: now + ms, order: order++, fire });
  const clock: RetryClock = {
    now: () => now,
    sleep: (ms) => new Promise((resolve) => after(ms, resolve)),
  };
  return {
    clock,
    after,
    async run(): Promise<void> {
      while (timers.length > 0) {
        let next = 0;
        for (const [index, timer] of timers.entries()) {
          const best = timers[next] as (typeof timers)[number];
          if (timer.at < best.at || (timer.at === best.at && timer.order < best.order)) next = index;
        }
        const [timer] = timers.splice(next, 1) as [(typeof timers)[number]];
        now = Math.max(now, timer.at);
        timer.fire();
        await new Promise((resolve) => setImmediate(resolve));
      }
    },
  };
}

function refusal(): ToolCallResult {
  const error = new ToolError("overloaded", "refused by the node", {
    retryable: true,
    data: { tool: "m.t", concurrent: 1, waiting: 0 },
  });
  markRefusedBeforeRun(error);
  return { ok: false, error };
}

/** One call of the schedule: its module, when it starts, its limit, and each send's answer and duration. */
interface PlannedCall {
  readonly module: number;
  readonly startsAt: number;
  readonly limitMs: number;
  readonly refused: readonly boolean[];
  readonly durations: readonly number[];
  readonly jitterSeed: number;
}

interface Schedule {
  readonly policy: RetryPolicy;
  readonly budget: RetryBudgetPolicy;
  readonly calls: readonly PlannedCall[];
  /** How many modules the calls go to, and how many budgets of their own the client keeps. */
  readonly modules: number;
  readonly cap: number;
}

function schedule(seed: number): Schedule {
  const random = seededRandom(seed);
  const budget = retryBudgetPolicy({
    ratio: random() < 0.2 ? 0 : random(),
    minRetriesPerSecond: random() < 0.3 ? 0 : random() * 20,
    windowMs: 50 + random() * 2_000,
  }) as RetryBudgetPolicy;
  const policy = retryPolicy({
    attempts: 1 + Math.floor(random() * 12),
    initialDelayMs: random() * 40,
    maxDelayMs: random() * 300,
  }) as RetryPolicy;
  // From a flood (every send refused) to a refusal now and then.
  const refusedShare = 0.3 + random() * 0.7;
  const spread = random() * 3 * budget.windowMs;
  // Drawn apart, so the calls' other draws are those of one module's schedule: module 0 often floods.
  const moduleRandom = seededRandom(seed * 31 + 7);
  const modules = 1 + Math.floor(moduleRandom() * 4);
  const flood = moduleRandom() < 0.7 ? 0.4 + moduleRandom() * 0.5 : 0;
  const cap = moduleRandom() < 0.7 ? maxModuleBudgets : 1 + Math.floor(moduleRandom() * 3);
  const calls = Array.from({ length: 1 + Math.floor(random() * 60) }, (_, index) => ({
    module: moduleRandom() < flood ? 0 : Math.floor(moduleRandom() * modules),
    startsAt: random() * spread,
    limitMs: random() < 0.1 ? Number.POSITIVE_INFINITY : 50 + random() * 3_000,
    refused: Array.from({ length: 12 }, () => random() < refusedShare),
    durations: Array.from({ length: 12 }, () => random() * 20),
    jitterSeed: seed * 1_000 + index,
  }));
  return { policy, budget, calls, modules, cap };
}

/** The schedule played out, each call's retries out of `budgetOf` its module (none: not budgeted). */
async function play(plan: Schedule, budgetOf: (module: number) => RetryBudget | undefined) {
  const time = virtualTime();
  const sends = plan.calls.map(() => 0);
  const results: ToolCallResult[] = [];
  for (const [index, call] of plan.calls.entries()) {
    const send = async (timeoutMs: number): Promise<ToolCallResult> => {
      const attempt = sends[index] ?? 0;
      sends[index] = attempt + 1;
      const took = call.durations[attempt] ?? 0;
      await new Promise<void>((resolve) => time.after(Math.min(took, timeoutMs), resolve));
      if (took > timeoutMs)
        return { ok: false, error: new ToolError("timeout", "late", { retryable: true }) };
      return call.refused[attempt] === false ? { ok: true, output: { attempt } } : refusal();
    };
    const budget = budgetOf(call.module);
    time.after(call.startsAt, async () => {
      const startedAt = time.clock.now();
      budget?.sent(startedAt);
      const first = await send(call.limitMs);
      results[index] = await retryOverloaded(first, {
        policy: plan.policy,
        deadline: startedAt + call.limitMs,
        name: "m.t",
        signal: undefined,
        clock: time.clock,
        random: seededRandom(call.jitterSeed),
        budget,
        send,
      });
    });
  }
  await time.run();
  return { sends, results };
}

const budgetSpent = (result: ToolCallResult | undefined): boolean =>
  result !== undefined &&
  !result.ok &&
  (result.error.data as { retryBudgetSpent?: boolean } | undefined)?.retryBudgetSpent === true;

describe("the retry budget: one for all of a client's calls", () => {
  it("holds many calls' retries to its bound and stops nothing else, through 1,000 random schedules", async () => {
    const seen = { stopped: 0, untouched: 0, floods: 0 };
    for (let seed = 1; seed <= 1_000; seed += 1) {
      const plan = schedule(seed);
      const at = `seed ${seed}`;
      const log: BudgetLog = [];
      const one = logged(createRetryBudget(plan.budget), log);
      const budgeted = await play(plan, () => one);
      const free = await play(plan, () => undefined);
      assertWithinBudget(log, plan.budget, at);
      const retries = budgeted.sends.reduce((sum, sent) => sum + sent - 1, 0);
      assert.equal(log.filter((event) => event.kind === "spent").length, retries, `${at}: retries logged`);
      for (const [index, result] of budgeted.results.entries()) {
        const where = `${at}, call ${index}`;
        assert.ok(result !== undefined, `${where}: answered`);
        if (budgetSpent(result)) {
          // Stopped short where the budget said no: fewer sends than without it, the refusal kept.
          assert.ok(!result.ok && result.error.code === "overloaded" && result.error.retryable, where);
          assert.match(result.error.message, /the client's retry budget for the module is spent/, where);
          assert.ok((budgeted.sends[index] as number) <= (free.sends[index] as number), where);
          seen.stopped += 1;
        } else {
          assert.deepEqual(result, free.results[index], `${where}: as without a budget`);
          assert.equal(budgeted.sends[index], free.sends[index], `${where}: its sends`);
          seen.untouched += 1;
        }
      }
      const freeRetries = free.sends.reduce((sum, sent) => sum + sent - 1, 0);
      if (freeRetries > 2 * (retries + 1)) seen.floods += 1;
    }
    assert.ok(seen.stopped > 1_000 && seen.untouched > 1_000 && seen.floods > 50, JSON.stringify(seen));
  });
});

describe("the retry budget: one per module", () => {
  it("spends no module's retries on another's flood, within each budget's bound, through 1,000 random schedules", async () => {
    const seen = { apart: 0, spared: 0, capped: 0 };
    for (let seed = 1; seed <= 1_000; seed += 1) {
      const plan = schedule(seed);
      const at = `seed ${seed}`;
      const logs: BudgetLog[] = [];
      const budgets = createModuleBudgets(plan.budget, plan.cap, (policy) => {
        const log: BudgetLog = [];
        logs.push(log);
        return logged(createRetryBudget(policy), log);
      });
      const perModule = await play(plan, (module) => budgets.of(`tackle.tools.m${module}`));
      const free = await play(plan, () => undefined);
      // Each budget, a module's own or the one shared past the cap, holds its bound.
      for (const [index, log] of logs.entries())
        assertWithinBudget(log, plan.budget, `${at}, budget ${index}`);
      assert.ok(budgets.ownBudgets() <= plan.cap, at);
      for (const [index, result] of perModule.results.entries()) {
        if (budgetSpent(result)) continue;
        assert.deepEqual(result, free.results[index], `${at}, call ${index}: as without a budget`);
      }
      if (plan.cap < plan.modules) {
        seen.capped += 1;
        continue;
      }
      // Each module with a budget of its own: its calls get what they would get alone with one.
      const clientWide = await play(
        plan,
        (
          (one) => () =>
            one
        )(createRetryBudget(plan.budget)),
      );
      for (let module = 0; module < plan.modules; module += 1) {
        const indexes = plan.calls.flatMap((call, index) => (call.module === module ? [index] : []));
        const alone = await play(
          { ...plan, calls: indexes.map((index) => plan.calls[index] as PlannedCall) },
          (
            (one) => () =>
              one
          )(createRetryBudget(plan.budget)),
        );
        for (const [position, index] of indexes.entries()) {
          const where = `${at}, module ${module}, call ${index}`;
          assert.deepEqual(perModule.results[index], alone.results[position], where);
          assert.equal(perModule.sends[index], alone.sends[position], where);
          // Stopped by one client-wide budget, not by its module's: another module's calls spent it.
          if (budgetSpent(clientWide.results[index]) && !budgetSpent(perModule.results[index]))
            seen.spared += 1;
        }
      }
      seen.apart += 1;
    }
    assert.ok(seen.apart > 500 && seen.capped > 100 && seen.spared > 500, JSON.stringify(seen));
  });
});

describe("the retry budget: an idle client, the defaults and the options", () => {
  it("gives a call of an idle client all six sends, and again a window after a flood spent it", async () => {
    const time = virtualTime();
    const budget = createRetryBudget(defaultRetryBudget);
    const refusedCall = async (): Promise<{ sends: number; result: ToolCallResult }> => {
      let sends = 1;
      budget.sent(time.clock.now());
      const answer = retryOverloaded(refusal(), {
        policy: defaultRetryOverloaded,
        deadline: Number.POSITIVE_INFINITY,
        name: "m.t",
        signal: undefined,
        clock: time.clock,
        random: Math.random,
        budget,
        send: async () => {
          sends += 1;
          return refusal();
        },
      });
      await time.run();
      return { sends, result: await answer };
    };
    const idle = await refusedCall();
    assert.equal(idle.sends, 6);
    assert.ok(!idle.result.ok);
    assert.deepEqual(idle.result.error.data, { tool: "m.t", concurrent: 1, waiting: 0, attempts: 6 });
    // A flood: 1,000 calls sent at once earn 200 retries, the floor 100 over the window; 295 spent here.
    for (let call = 0; call < 1_000; call += 1) budget.sent(time.clock.now());
    for (let retry = 0; retry < 300 - 5; retry += 1) {
      assert.ok(budget.allows(time.clock.now()), `retry ${retry + 1}`);
      budget.spend(time.clock.now());
    }
    const flooded = await refusedCall();
    assert.equal(flooded.sends, 1, "the budget is spent: the refusal comes back at once");
    assert.ok(!flooded.result.ok);
    assert.equal((flooded.result.error.data as { retryBudgetSpent?: boolean }).retryBudgetSpent, true);
    // A window on, what the flood earned and spent has lapsed: the floor alone gives all five retries.
    time.after(defaultRetryBudget.windowMs, () => {});
    await time.run();
    const later = await refusedCall();
    assert.equal(later.sends, 6);
  });

  it("defaults to 20% of the calls sent and 10 retries a second over 10 s, and checks its options", () => {
    assert.deepEqual(retryBudgetPolicy(undefined), { ratio: 0.2, minRetriesPerSecond: 10, windowMs: 10_000 });
    assert.equal(budgetReserve(defaultRetryBudget), 100);
    assert.equal(retryBudgetPolicy(false), undefined);
    assert.deepEqual(retryBudgetPolicy({ ratio: 0 }), {
      ...defaultRetryBudget,
      ratio: 0,
    });
    assert.throws(() => retryBudgetPolicy({ ratio: -0.1 }), RangeError);
    assert.throws(() => retryBudgetPolicy({ ratio: Number.NaN }), RangeError);
    assert.throws(() => retryBudgetPolicy({ minRetriesPerSecond: Number.POSITIVE_INFINITY }), RangeError);
    assert.throws(() => retryBudgetPolicy({ windowMs: 5 }), RangeError);
    assert.throws(() => retryPolicy({ budget: { windowMs: 0 } }), /retryOverloaded\.budget\.windowMs/);
    // No floor and no ratio: nothing is sent again.
    const none = createRetryBudget(
      retryBudgetPolicy({ ratio: 0, minRetriesPerSecond: 0 }) as RetryBudgetPolicy,
    );
    none.sent(0);
    assert.equal(none.allows(0), false);
  });
});
