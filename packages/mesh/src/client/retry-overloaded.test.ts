/**
 * The retry of a node's `overloaded` refusal (ADR 0215) against an oracle, on a virtual clock: 4,000
 * random cases of policies, time limits, answers (refusals, a tool's own `overloaded`, other errors,
 * success), send durations, late timers and aborts, and the client's retry budget (ADR 0216) with the
 * client's other calls sending and retrying before and while this one waits. Every send leaves before
 * the deadline with what is left of it, only a node's refusal is sent again, never more than `attempts`
 * sends, each wait within its jittered range, never a retry past the budget, and the caller gets the
 * answer as it came or the last refusal with `data.attempts` (and `retryBudgetSpent` when the budget
 * stopped it); a call of an otherwise idle client gets every retry its policy gives. The budget is the
 * call's module's (ADR 0217): the client's calls to another module, a flood in most cases, send and
 * retry meanwhile through their own, and the oracle, which never sees them, still gives every answer.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ToolAbortedError, type ToolCallResult, ToolError } from "@tackle/core";
import { seededRandom } from "@tackle/test-support";
import { assertWithinBudget, type BudgetLog, logged } from "./fixtures/budget-log.ts";
import { createModuleBudgets } from "./module-budgets.ts";
import {
  budgetReserve,
  budgetSlots,
  type RetryBudget,
  type RetryBudgetPolicy,
  retryBudgetPolicy,
} from "./retry-budget.ts";
import {
  defaultRetryOverloaded,
  markRefusedBeforeRun,
  type RetryPolicy,
  retryOverloaded,
  retryPolicy,
} from "./retry-overloaded.ts";

type Kind = "refused" | "own_overloaded" | "tool_failed" | "unavailable" | "not_delivered" | "ok";

/** One case: what each send is answered and how long it takes, how late each timer fires, the abort. */
interface Scenario {
  readonly policy: RetryPolicy;
  readonly limitMs: number;
  readonly answers: readonly Kind[];
  readonly durations: readonly number[];
  readonly late: readonly number[];
  /** When the caller aborts (virtual ms after the start), if it does. */
  readonly abortAt: number | undefined;
  readonly jitterSeed: number;
  /** The client's budget (undefined: not budgeted), and its other calls: sends and retries per ms. */
  readonly budget: RetryBudgetPolicy | undefined;
  readonly others: { readonly sentPerMs: number; readonly retriedPerMs: number; readonly seed: number };
  /** The client's calls to another module meanwhile, often a flood: sends and retries per ms. */
  readonly elsewhere: { readonly sentPerMs: number; readonly retriedPerMs: number; readonly seed: number };
}

const start = 1_000;
const nodeData = { tool: "m.t", concurrent: 1, waiting: 0 };

function scenario(seed: number): Scenario {
  const random = seededRandom(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const policy = retryPolicy({
    attempts: 1 + Math.floor(random() * 12),
    initialDelayMs: random() < 0.1 ? 0 : random() * 40,
    maxDelayMs: random() * 300,
  }) as RetryPolicy;
  const limitMs = random() < 0.05 ? Number.POSITIVE_INFINITY : Math.floor(random() * 1_500);
  const otherKinds: Kind[] = ["own_overloaded", "tool_failed", "unavailable", "not_delivered", "ok"];
  const answers = Array.from({ length: 16 }, () => (random() < 0.75 ? "refused" : pick(otherKinds)));
  const durations = Array.from({ length: 16 }, () => (random() < 0.1 ? random() * 2_000 : random() * 20));
  const lateTimers = random() < 0.3;
  const late = Array.from({ length: 16 }, () => (lateTimers ? random() * 30 : 0));
  const abortAt = random() < 0.2 ? start + random() * 1_000 : undefined;
  const budget =
    random() < 0.2
      ? undefined
      : retryBudgetPolicy({
          ratio: random() < 0.2 ? 0 : random() * 0.6,
          minRetriesPerSecond: random() < 0.3 ? 0 : random() * 8,
          windowMs: 10 + random() * 2_000,
        });
  const idle = random() < 0.3;
  const others = {
    sentPerMs: idle ? 0 : random() * 0.05,
    retriedPerMs: idle ? 0 : random() * 0.05,
    seed: seed * 104_729 + 3,
  };
  // Drawn apart, so that the rest of the case is as it was without another module.
  const floodRandom = seededRandom(seed * 7 + 5);
  const flooding = floodRandom() < 0.7;
  const elsewhere = {
    sentPerMs: flooding ? floodRandom() * 0.2 : 0,
    retriedPerMs: flooding ? floodRandom() * 0.2 : 0,
    seed: seed * 15_485_863 + 11,
  };
  return {
    ...{ policy, limitMs, answers, durations, late, abortAt, jitterSeed: seed * 7_919 + 1 },
    ...{ budget, others, elsewhere },
  };
}

/** The budget's rule as a plain list: the window is `now`'s slot and the nine before it. */
function oracleBudget(policy: RetryBudgetPolicy): RetryBudget {
  const events: { slot: number; kind: "sent" | "spent" }[] = [];
  const slotOf = (now: number) => Math.floor(now / (policy.windowMs / budgetSlots));
  return {
    sent: (now) => events.push({ slot: slotOf(now), kind: "sent" }),
    spend: (now) => events.push({ slot: slotOf(now), kind: "spent" }),
    allows(now) {
      const window = events.filter((event) => event.slot > slotOf(now) - budgetSlots);
      const sent = window.filter((event) => event.kind === "sent").length;
      const spent = window.length - sent;
      return spent + 1 <= policy.ratio * sent + budgetReserve(policy) + 1e-9;
    },
  };
}

/**
 * The scenario played out: a virtual clock, the sends made, the caller's abort, and the client's other
 * calls to the module sending and retrying through `budget` as the clock moves, and its calls to
 * another module through `elsewhere` (the oracle has none: they must change nothing here).
 */
function world(case_: Scenario, budget: RetryBudget | undefined, elsewhere?: RetryBudget) {
  let now = start;
  let answered = 0;
  let slept = 0;
  const controller = new AbortController();
  const otherRandom = seededRandom(case_.others.seed);
  const elsewhereRandom = seededRandom(case_.elsewhere.seed);
  /** Calls between `now` and `until` at `rates`: each sends, or retries if `into` allows. */
  const callsUntil = (
    until: number,
    rates: Scenario["others"],
    random: () => number,
    into: RetryBudget | undefined,
  ) => {
    const span = until - now;
    const times = (perMs: number, kind: "sent" | "retry") =>
      Array.from({ length: Math.floor(perMs * span + random()) }, () => ({
        at: now + random() * span,
        kind,
      }));
    const events = [...times(rates.sentPerMs, "sent"), ...times(rates.retriedPerMs, "retry")];
    for (const event of events.sort((a, b) => a.at - b.at)) {
      if (event.kind === "sent") into?.sent(event.at);
      else if (into?.allows(event.at)) into.spend(event.at);
    }
  };
  /** The client's other calls between `now` and `until`, to this module and to another. */
  const othersUntil = (until: number) => {
    if (budget === undefined || !(until > now)) return;
    callsUntil(until, case_.others, otherRandom, budget);
    callsUntil(until, case_.elsewhere, elsewhereRandom, elsewhere);
  };
  const sends: { at: number; timeoutMs: number }[] = [];
  const sleeps: number[] = [];
  const answers: ToolCallResult[] = [];
  const abortBy = (until: number): boolean => {
    if (case_.abortAt === undefined || controller.signal.aborted || case_.abortAt > until) return false;
    othersUntil(case_.abortAt);
    now = Math.max(now, case_.abortAt);
    controller.abort(new Error("caller gave up"));
    return true;
  };
  return {
    controller,
    sends,
    sleeps,
    answers,
    now: () => now,
    /** Before the call: the client's other calls in the window and a half behind it. */
    history(): void {
      if (case_.budget === undefined) return;
      now = start - 1.5 * case_.budget.windowMs;
      othersUntil(start);
      now = start;
    },
    sleep(ms: number): void {
      sleeps.push(ms);
      const wake = now + ms + (case_.late[slept++] ?? 0);
      if (abortBy(wake)) return;
      othersUntil(wake);
      now = wake;
    },
    send(timeoutMs: number): ToolCallResult {
      sends.push({ at: now, timeoutMs });
      const index = answered++;
      const took = case_.durations[index] ?? 0;
      const ends = now + Math.min(took, timeoutMs);
      let result: ToolCallResult;
      if (abortBy(ends)) result = { ok: false, error: new ToolAbortedError("m.t", controller.signal.reason) };
      else {
        othersUntil(ends);
        now = ends;
        result =
          took > timeoutMs
            ? { ok: false, error: new ToolError("timeout", "the node's limit", { retryable: true }) }
            : answerOf(case_.answers[index] ?? "ok");
      }
      answers.push(result);
      return result;
    },
  };
}

function answerOf(kind: Kind): ToolCallResult {
  if (kind === "ok") return { ok: true, output: { fine: true } };
  if (kind === "refused") {
    const error = new ToolError("overloaded", "refused by the node", { retryable: true, data: nodeData });
    markRefusedBeforeRun(error);
    return { ok: false, error };
  }
  const code = kind === "own_overloaded" ? "overloaded" : kind;
  return {
    ok: false,
    error: new ToolError(code, `the tool's ${code}`, { retryable: kind !== "tool_failed" }),
  };
}

type Outcome =
  | { readonly kind: "answer"; readonly index: number }
  | { readonly kind: "refused"; readonly attempts: number; readonly budgetSpent: boolean }
  | { readonly kind: "aborted" };

/** The oracle: the rule as a plain loop, on the same scenario. */
function oracle(case_: Scenario): { outcome: Outcome; w: ReturnType<typeof world> } {
  const { policy } = case_;
  const budget = case_.budget === undefined ? undefined : oracleBudget(case_.budget);
  const w = world(case_, budget);
  const jitter = seededRandom(case_.jitterSeed);
  const deadline = start + case_.limitMs;
  const refused = (attempts: number, budgetSpent = false) => ({
    outcome: { kind: "refused", attempts, budgetSpent } as const,
    w,
  });
  w.history();
  budget?.sent(start);
  let last = w.send(case_.limitMs);
  for (let sent = 1; ; sent += 1) {
    const refusal =
      !last.ok && last.error.code === "overloaded" && last.error.message === "refused by the node";
    if (!refusal) return { outcome: { kind: "answer", index: sent - 1 }, w };
    if (sent >= policy.attempts) return refused(sent);
    const top = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** (sent - 1));
    const delay = top / 2 + jitter() * (top / 2);
    if (deadline - (w.now() + delay) < 1) return refused(sent);
    if (budget !== undefined && !budget.allows(w.now())) return refused(sent, true);
    w.sleep(delay);
    if (w.controller.signal.aborted) return { outcome: { kind: "aborted" }, w };
    const left = deadline - w.now();
    if (left < 1) return refused(sent);
    if (budget !== undefined && !budget.allows(w.now())) return refused(sent, true);
    budget?.spend(w.now());
    last = w.send(Math.floor(left));
  }
}

async function played(case_: Scenario) {
  const log: BudgetLog = [];
  // The client's budgets per module (ADR 0217): this call's module's, and another's it floods.
  const budgets = case_.budget === undefined ? undefined : createModuleBudgets(case_.budget);
  const budget = budgets === undefined ? undefined : logged(budgets.of("tackle.tools.m"), log);
  const w = world(case_, budget, budgets?.of("tackle.tools.flood"));
  const deadline = start + case_.limitMs;
  w.history();
  budget?.sent(start);
  const first = w.send(case_.limitMs);
  const result = await retryOverloaded(first, {
    policy: case_.policy,
    deadline,
    name: "m.t",
    signal: w.controller.signal,
    random: seededRandom(case_.jitterSeed),
    budget,
    clock: { now: w.now, sleep: async (ms) => w.sleep(ms) },
    send: async (timeoutMs) => w.send(timeoutMs),
  });
  return { result, w, deadline, log };
}

describe("retryOverloaded", () => {
  it("sends again only a node's refusal, within its attempts, deadline and budget, through 4,000 random cases", async () => {
    const seen = {
      budgetSpent: 0,
      budgetSpentAfterRetries: 0,
      budgetSpentInWait: 0,
      idleRetried: 0,
      beside: 0,
    };
    for (let seed = 1; seed <= 4_000; seed += 1) {
      const case_ = scenario(seed);
      const { policy } = case_;
      const { result, w, deadline, log } = await played(case_);
      const expected = oracle(case_);
      const at = `seed ${seed}`;
      assert.deepEqual(w.sends, expected.w.sends, `${at}: the sends`);
      assert.deepEqual(w.sleeps, expected.w.sleeps, `${at}: the waits`);
      // Never past the deadline, never more than the attempts.
      assert.ok(w.sends.length <= policy.attempts, `${at}: ${w.sends.length} sends`);
      for (const [index, send] of w.sends.entries()) {
        if (index === 0) continue;
        assert.ok(send.timeoutMs >= 1 && send.at + send.timeoutMs <= deadline, `${at}: send ${index}`);
        const before = w.answers[index - 1] as ToolCallResult;
        assert.ok(
          !before.ok && before.error.message === "refused by the node",
          `${at}: only a refusal is sent again`,
        );
      }
      // Each wait within its range, and ending at least 1 ms before the deadline.
      for (const [index, ms] of w.sleeps.entries()) {
        const top = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** index);
        assert.ok(ms >= top / 2 && ms <= top, `${at}: wait ${index + 1} of ${ms} ms`);
      }
      const outcome = expected.outcome;
      if (outcome.kind === "answer") {
        assert.equal(result, w.answers[outcome.index], `${at}: the answer as it came`);
      } else if (outcome.kind === "aborted") {
        assert.ok(!result.ok && ToolAbortedError.isInstance(result.error), `${at}: aborted`);
      } else {
        assert.ok(!result.ok, at);
        assert.equal(result.error.code, "overloaded", at);
        assert.equal(result.error.retryable, true, at);
        const budgetSpent = outcome.budgetSpent ? { retryBudgetSpent: true } : {};
        assert.deepEqual(result.error.data, { ...nodeData, attempts: outcome.attempts, ...budgetSpent }, at);
        assert.equal(outcome.attempts, w.sends.length, at);
        if (outcome.budgetSpent) {
          assert.match(result.error.message, /the client's retry budget for the module is spent/, at);
          seen.budgetSpent += 1;
          if (outcome.attempts > 1) seen.budgetSpentAfterRetries += 1;
          // Spent by the client's other calls while this one waited: it stops after the wait.
          if (w.sleeps.length === w.sends.length) seen.budgetSpentInWait += 1;
        }
      }
      // The budget's bound holds over the client's calls, this one's retries among them.
      if (case_.budget !== undefined) {
        assertWithinBudget(log, case_.budget, at);
        assert.equal(log.filter((event) => event.kind === "spent").length >= w.sends.length - 1, true, at);
        // An otherwise idle client whose floor covers the policy's retries: the budget never stops it.
        const idle = case_.others.sentPerMs === 0 && case_.others.retriedPerMs === 0;
        if (idle && budgetReserve(case_.budget) >= policy.attempts - 1) {
          assert.ok(outcome.kind !== "refused" || !outcome.budgetSpent, `${at}: an idle client's call`);
          if (w.sends.length > 1) seen.idleRetried += 1;
          // ... while the client flooded another module.
          if (w.sends.length > 1 && case_.elsewhere.retriedPerMs > 0) seen.beside += 1;
        }
      }
    }
    // The cases reached each way the budget can end a call.
    assert.ok(seen.budgetSpent > 100 && seen.budgetSpentAfterRetries > 20, JSON.stringify(seen));
    assert.ok(seen.budgetSpentInWait > 20, JSON.stringify(seen));
    assert.ok(seen.idleRetried > 50 && seen.beside > 30, JSON.stringify(seen));
  });

  it("defaults to 6 sends, waits from 5–10 ms up to 250 ms, and checks its options", () => {
    assert.deepEqual(retryPolicy(undefined), defaultRetryOverloaded);
    assert.deepEqual(defaultRetryOverloaded, {
      attempts: 6,
      initialDelayMs: 10,
      maxDelayMs: 250,
      budget: { ratio: 0.2, minRetriesPerSecond: 10, windowMs: 10_000 },
    });
    assert.equal(retryPolicy(false), undefined);
    assert.equal(retryPolicy({ budget: false })?.budget, undefined);
    assert.deepEqual(retryPolicy({ budget: { ratio: 0.5 } })?.budget, {
      ratio: 0.5,
      minRetriesPerSecond: 10,
      windowMs: 10_000,
    });
    assert.deepEqual(retryPolicy({ attempts: 2 }), {
      ...defaultRetryOverloaded,
      attempts: 2,
    });
    assert.throws(() => retryPolicy({ attempts: 0 }), RangeError);
    assert.throws(() => retryPolicy({ attempts: 1.5 }), RangeError);
    assert.throws(() => retryPolicy({ initialDelayMs: -1 }), RangeError);
    assert.throws(() => retryPolicy({ maxDelayMs: Number.POSITIVE_INFINITY }), RangeError);
  });
});
