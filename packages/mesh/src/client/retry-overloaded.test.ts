/**
 * The retry of a node's `overloaded` refusal (ADR 0215) against an oracle, on a virtual clock: 4,000
 * random cases of policies, time limits, answers (refusals, a tool's own `overloaded`, other errors,
 * success), send durations, late timers and aborts. Every send leaves before the deadline with what is
 * left of it, only a node's refusal is sent again, never more than `attempts` sends, each wait within
 * its jittered range, and the caller gets the answer as it came or the last refusal with
 * `data.attempts`.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ToolAbortedError, type ToolCallResult, ToolError } from "@tackle/core";
import { seededRandom } from "@tackle/test-support";
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
  const others: Kind[] = ["own_overloaded", "tool_failed", "unavailable", "not_delivered", "ok"];
  const answers = Array.from({ length: 16 }, () => (random() < 0.75 ? "refused" : pick(others)));
  const durations = Array.from({ length: 16 }, () => (random() < 0.1 ? random() * 2_000 : random() * 20));
  const lateTimers = random() < 0.3;
  const late = Array.from({ length: 16 }, () => (lateTimers ? random() * 30 : 0));
  const abortAt = random() < 0.2 ? start + random() * 1_000 : undefined;
  return { policy, limitMs, answers, durations, late, abortAt, jitterSeed: seed * 7_919 + 1 };
}

/** The scenario played out: a virtual clock, the sends made, and the caller's abort. */
function world(case_: Scenario) {
  let now = start;
  let answered = 0;
  let slept = 0;
  const controller = new AbortController();
  const sends: { at: number; timeoutMs: number }[] = [];
  const sleeps: number[] = [];
  const answers: ToolCallResult[] = [];
  const abortBy = (until: number): boolean => {
    if (case_.abortAt === undefined || controller.signal.aborted || case_.abortAt > until) return false;
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
    sleep(ms: number): void {
      sleeps.push(ms);
      const wake = now + ms + (case_.late[slept++] ?? 0);
      if (!abortBy(wake)) now = wake;
    },
    send(timeoutMs: number): ToolCallResult {
      sends.push({ at: now, timeoutMs });
      const index = answered++;
      const took = case_.durations[index] ?? 0;
      const ends = now + Math.min(took, timeoutMs);
      let result: ToolCallResult;
      if (abortBy(ends)) result = { ok: false, error: new ToolAbortedError("m.t", controller.signal.reason) };
      else {
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
  | { readonly kind: "refused"; readonly attempts: number }
  | { readonly kind: "aborted" };

/** The oracle: the rule as a plain loop, on the same scenario. */
function oracle(case_: Scenario): { outcome: Outcome; w: ReturnType<typeof world> } {
  const { policy } = case_;
  const w = world(case_);
  const jitter = seededRandom(case_.jitterSeed);
  const deadline = start + case_.limitMs;
  let last = w.send(case_.limitMs);
  for (let sent = 1; ; sent += 1) {
    const refusal =
      !last.ok && last.error.code === "overloaded" && last.error.message === "refused by the node";
    if (!refusal) return { outcome: { kind: "answer", index: sent - 1 }, w };
    if (sent >= policy.attempts) return { outcome: { kind: "refused", attempts: sent }, w };
    const top = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** (sent - 1));
    const delay = top / 2 + jitter() * (top / 2);
    if (deadline - (w.now() + delay) < 1) return { outcome: { kind: "refused", attempts: sent }, w };
    w.sleep(delay);
    if (w.controller.signal.aborted) return { outcome: { kind: "aborted" }, w };
    const left = deadline - w.now();
    if (left < 1) return { outcome: { kind: "refused", attempts: sent }, w };
    last = w.send(Math.floor(left));
  }
}

async function played(case_: Scenario) {
  const w = world(case_);
  const deadline = start + case_.limitMs;
  const first = w.send(case_.limitMs);
  const result = await retryOverloaded(first, {
    policy: case_.policy,
    deadline,
    name: "m.t",
    signal: w.controller.signal,
    random: seededRandom(case_.jitterSeed),
    clock: { now: w.now, sleep: async (ms) => w.sleep(ms) },
    send: async (timeoutMs) => w.send(timeoutMs),
  });
  return { result, w, deadline };
}

describe("retryOverloaded", () => {
  it("sends again only a node's refusal, within its attempts and deadline, through 4,000 random cases", async () => {
    for (let seed = 1; seed <= 4_000; seed += 1) {
      const case_ = scenario(seed);
      const { policy } = case_;
      const { result, w, deadline } = await played(case_);
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
        assert.deepEqual(result.error.data, { ...nodeData, attempts: outcome.attempts }, at);
        assert.equal(outcome.attempts, w.sends.length, at);
      }
    }
  });

  it("defaults to 6 sends, waits from 5–10 ms up to 250 ms, and checks its options", () => {
    assert.deepEqual(retryPolicy(undefined), defaultRetryOverloaded);
    assert.deepEqual(defaultRetryOverloaded, { attempts: 6, initialDelayMs: 10, maxDelayMs: 250 });
    assert.equal(retryPolicy(false), undefined);
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
