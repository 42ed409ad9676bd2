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

/** One call of the schedule: when it starts, its limit, and each send's answer and duration. */
interface PlannedCall {
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
  const calls = Array.from({ length: 1 + Math.floor(random() * 60) }, (_, index) => ({
    startsAt: random() * spread,
    limitMs: random() < 0.1 ? Number.POSITIVE_INFINITY : 50 + random() * 3_000,
    refused: Array.from({ length: 12 }, () => random() < refusedShare),
    durations: Array.from({ length: 12 }, () => random() * 20),
    jitterSeed: seed * 1_000 + index,
  }));
  return { policy, budget, calls };
}

/** The schedule played out, every call sharing `budget` (none: not budgeted). */
async function play(plan: Schedule, budget: RetryBudget | undefined) {
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

describe("the retry budget", () => {
  it("holds many calls' retries to its bound and stops nothing else, through 1,000 random schedules", async () => {
    const seen = { stopped: 0, untouched: 0, floods: 0 };
    for (let seed = 1; seed <= 1_000; seed += 1) {
      const plan = schedule(seed);
      const at = `seed ${seed}`;
      const log: BudgetLog = [];
      const budgeted = await play(plan, logged(createRetryBudget(plan.budget), log));
      const free = await play(plan, undefined);
      assertWithinBudget(log, plan.budget, at);
      const retries = budgeted.sends.reduce((sum, sent) => sum + sent - 1, 0);
      assert.equal(log.filter((event) => event.kind === "spent").length, retries, `${at}: retries logged`);
      for (const [index, result] of budgeted.results.entries()) {
        const where = `${at}, call ${index}`;
        assert.ok(result !== undefined, `${where}: answered`);
        if (budgetSpent(result)) {
          // Stopped short where the budget said no: fewer sends than without it, the refusal kept.
          assert.ok(!result.ok && result.error.code === "overloaded" && result.error.retryable, where);
          assert.match(result.error.message, /the client's retry budget is spent/, where);
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
