/**
 * The client's retry budgets per module (ADR 0217) against an oracle, on a virtual clock: 4,000 random
 * sequences of calls sent, retries asked for and retries spent, over up to ten modules (one of them
 * often flooding) and caps of one to six budgets. The oracle keeps each module's events as a plain
 * list, drops the idle module least recently used when a new one needs a place and, with none idle,
 * counts the module in one shared list: every answer the budgets give is the oracle's, the budgets of
 * their own never pass the cap, and a module with a budget of its own is never answered by another's.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { seededRandom } from "@tackle/test-support";
import { createModuleBudgets, maxModuleBudgets } from "./module-budgets.ts";
import {
  budgetReserve,
  budgetSlots,
  createRetryBudget,
  defaultRetryBudget,
  type RetryBudgetPolicy,
  retryBudgetPolicy,
} from "./retry-budget.ts";

type Event = { readonly at: number; readonly kind: "sent" | "spent" };

/** The rule as plain lists: each module's events, in the order of their last event, and the shared ones. */
function oracleBudgets(policy: RetryBudgetPolicy, cap: number) {
  const modules: { prefix: string; events: Event[] }[] = [];
  const shared: Event[] = [];
  const slotOf = (now: number) => Math.floor(now / (policy.windowMs / budgetSlots));
  const inWindow = (events: readonly Event[], now: number) =>
    events.filter((event) => slotOf(event.at) > slotOf(now) - budgetSlots);
  const allowsOn = (events: readonly Event[], now: number) => {
    const window = inWindow(events, now);
    const sent = window.filter((event) => event.kind === "sent").length;
    return window.length - sent + 1 <= policy.ratio * sent + budgetReserve(policy) + 1e-9;
  };
  const lastAt = (events: readonly Event[]) => (events.at(-1) as Event).at;
  /** A place for a new module: a free one, or the idle module least recently used, dropped. */
  const room = (now: number): boolean => {
    if (modules.length < cap) return true;
    let dropped = -1;
    for (const [index, module] of modules.entries()) {
      if (inWindow(module.events, now).length > 0) continue;
      if (
        dropped < 0 ||
        lastAt(module.events) < lastAt((modules[dropped] as (typeof modules)[number]).events)
      )
        dropped = index;
    }
    if (dropped < 0) return false;
    modules.splice(dropped, 1);
    return true;
  };
  const event = (prefix: string, at: number, kind: Event["kind"]): "own" | "shared" => {
    const index = modules.findIndex((module) => module.prefix === prefix);
    if (index >= 0) {
      const [module] = modules.splice(index, 1) as [(typeof modules)[number]];
      module.events.push({ at, kind });
      modules.push(module);
      return "own";
    }
    if (room(at)) {
      modules.push({ prefix, events: [{ at, kind }] });
      return "own";
    }
    shared.push({ at, kind });
    return "shared";
  };
  return {
    allows(prefix: string, now: number): boolean {
      const module = modules.find((entry) => entry.prefix === prefix);
      if (module !== undefined) return allowsOn(module.events, now);
      return room(now) ? allowsOn([], now) : allowsOn(shared, now);
    },
    event,
    own: () => modules.length,
  };
}

interface Sequence {
  readonly policy: RetryBudgetPolicy;
  readonly cap: number;
  readonly modules: number;
  readonly steps: readonly { readonly gapMs: number; readonly module: number; readonly kind: number }[];
}

function sequence(seed: number): Sequence {
  const random = seededRandom(seed);
  const policy = retryBudgetPolicy({
    ratio: random() < 0.2 ? 0 : random() * 0.6,
    minRetriesPerSecond: random() < 0.3 ? 0 : random() * 4,
    windowMs: 10 + random() * 1_000,
  }) as RetryBudgetPolicy;
  const modules = 1 + Math.floor(random() * 10);
  // Module 0 floods in most sequences: it takes this share of the steps.
  const flood = random() < 0.7 ? 0.3 + random() * 0.6 : 0;
  const quiet = random() < 0.5;
  const steps = Array.from({ length: 200 }, () => ({
    gapMs: random() < 0.05 ? random() * 2 * policy.windowMs : (random() * policy.windowMs) / (quiet ? 5 : 40),
    module: random() < flood ? 0 : Math.floor(random() * modules),
    kind: random(),
  }));
  return { policy, cap: 1 + Math.floor(random() * 6), modules, steps };
}

describe("the retry budgets per module", () => {
  it("answer as the oracle, within their cap, through 4,000 random sequences", () => {
    const seen = { own: 0, shared: 0, refused: 0, allowed: 0, dropped: 0, full: 0 };
    for (let seed = 1; seed <= 4_000; seed += 1) {
      const plan = sequence(seed);
      const budgets = createModuleBudgets(plan.policy, plan.cap);
      const oracle = oracleBudgets(plan.policy, plan.cap);
      let now = 0;
      for (const [index, step] of plan.steps.entries()) {
        const at = `seed ${seed}, step ${index}`;
        now += step.gapMs;
        const prefix = `tackle.tools.m${step.module}`;
        const budget = budgets.of(prefix);
        const before = oracle.own();
        if (step.kind < 0.45) {
          budget.sent(now);
          seen[oracle.event(prefix, now, "sent")] += 1;
        } else {
          // A retry asked for, and spent when allowed (as a call does, with no wait between).
          const allowed = budget.allows(now);
          assert.equal(allowed, oracle.allows(prefix, now), `${at}: allows`);
          seen[allowed ? "allowed" : "refused"] += 1;
          if (allowed && step.kind < 0.9) {
            budget.spend(now);
            seen[oracle.event(prefix, now, "spent")] += 1;
          }
        }
        if (oracle.own() < before) seen.dropped += 1;
        assert.equal(budgets.ownBudgets(), oracle.own(), `${at}: budgets of their own`);
        assert.ok(budgets.ownBudgets() <= plan.cap, `${at}: within the cap`);
        if (budgets.ownBudgets() === plan.cap) seen.full += 1;
      }
    }
    // The sequences reached modules with budgets of their own, the shared one, and idle ones dropped.
    assert.ok(seen.shared > 10_000 && seen.own > 100_000, JSON.stringify(seen));
    assert.ok(seen.refused > 10_000 && seen.allowed > 10_000 && seen.dropped > 1_000, JSON.stringify(seen));
  });

  it("spends no module's retries on another's flood while each has a budget of its own", () => {
    const budgets = createModuleBudgets(defaultRetryBudget);
    const flooded = budgets.of("tackle.tools.a");
    const healthy = budgets.of("tackle.tools.b");
    healthy.sent(0);
    // A flood on a: 1,000 calls earn 200 retries, the floor 100; all 300 spent.
    for (let call = 0; call < 1_000; call += 1) flooded.sent(1);
    for (let retry = 0; retry < 300; retry += 1) {
      assert.ok(flooded.allows(2), `retry ${retry + 1}`);
      flooded.spend(2);
    }
    assert.equal(flooded.allows(2), false, "a's budget is spent");
    // b's five retries come out of b's own floor.
    for (let retry = 0; retry < 5; retry += 1) {
      assert.ok(healthy.allows(3), `b's retry ${retry + 1}`);
      healthy.spend(3);
    }
    // The same flood through one client-wide budget (ADR 0216) spends b's retries too.
    const one = createRetryBudget(defaultRetryBudget);
    one.sent(0);
    for (let call = 0; call < 1_000; call += 1) one.sent(1);
    for (let retry = 0; retry < 300; retry += 1) one.spend(2);
    assert.equal(one.allows(3), false);
  });

  it("keeps at most 1,024 modules' budgets, gives an idle one's place to a new module, and checks its cap", () => {
    assert.equal(maxModuleBudgets, 1_024);
    const budgets = createModuleBudgets(defaultRetryBudget);
    for (let module = 0; module < 5_000; module += 1) budgets.of(`tackle.tools.m${module}`).sent(module);
    assert.equal(budgets.ownBudgets(), 1_024);
    // A window later every one of them is idle: a new module takes a place, the count stays at the cap.
    budgets.of("tackle.tools.late").sent(5_000 + defaultRetryBudget.windowMs);
    assert.equal(budgets.ownBudgets(), 1_024);
    assert.throws(() => createModuleBudgets(defaultRetryBudget, 0), RangeError);
    assert.throws(() => createModuleBudgets(defaultRetryBudget, 1.5), RangeError);
  });
});
