/**
 * Random plans for the call-lifecycle property (`test/call-lifecycle.property.test.ts`) and the
 * oracle's prediction of each call's answer from its plan alone.
 *
 * A case is one tool set of one tool, called several times; each call plans what its handler does,
 * its time limit, its signal and when it starts. Every time is a whole number of milliseconds on a
 * 2 ms grid, so the handler, the caller's abort and the deadline often fall on the same millisecond.
 */

type Random = () => number;

const below = (random: Random, count: number) => Math.floor(random() * count);
const pick = <T>(random: Random, list: readonly T[]): T => list[below(random, list.length)] as T;
/** 2 to 20 ms. */
const grid = (random: Random) => 2 * (1 + below(random, 10));

/** How a handler ends: the value its output schema takes, a failure of one sort, or an interrupt. */
export type Ending = "value" | "plain_error" | "coded_error" | "thrown_value" | "bad_output" | "interrupt";

export type Behaviour =
  /** Ends before `execute` returns. */
  | { readonly way: "sync"; readonly ending: Ending }
  /** Ends after `ms`; `deaf` ignores its signal, else it stops (rejects with the signal's reason) on abort. */
  | { readonly way: "after"; readonly ending: Ending; readonly ms: number; readonly deaf: boolean }
  /** Waits for its signal and stops then. */
  | { readonly way: "hang" };

export type AbortPlan =
  | { readonly when: "no_signal" }
  | { readonly when: "never" }
  | { readonly when: "before" }
  | { readonly when: "at"; readonly ms: number };

export interface CallPlan {
  readonly index: number;
  /** When the call starts, from the case's start; calls with the same start are made in one turn. */
  readonly launchMs: number;
  readonly validInput: boolean;
  readonly behaviour: Behaviour;
  /** The call's own `timeoutMs`. */
  readonly timeoutMs: number | undefined;
  readonly abort: AbortPlan;
  /** The time limit that applies: the call's, else the tool's, else the set's, else 60 s. */
  readonly deadlineMs: number;
}

export interface CasePlan {
  readonly seed: number;
  readonly setTimeoutMs: number | undefined;
  readonly toolTimeoutMs: number | undefined;
  readonly maxStrayRuns: number | undefined;
  readonly calls: readonly CallPlan[];
}

/** A deadline that can end a call within the case; 0, Infinity, 60 s and the long ones cannot. */
export const endsInCase = (deadlineMs: number) => deadlineMs > 0 && deadlineMs <= 1_000;

const endings: readonly Ending[] = [
  "value",
  "value",
  "value",
  "plain_error",
  "coded_error",
  "thrown_value",
  "bad_output",
  "interrupt",
];
/** 0 and Infinity disable the limit; 2^31 ms and 30 days are past what one Node timer holds. */
const callTimeouts: readonly (number | "grid" | undefined)[] = [
  undefined,
  undefined,
  "grid",
  "grid",
  0,
  Number.POSITIVE_INFINITY,
  2 ** 31,
  2_592_000_000,
];

function randomTimeout(
  random: Random,
  choices: readonly (number | "grid" | undefined)[],
): number | undefined {
  const choice = pick(random, choices);
  return choice === "grid" ? grid(random) : choice;
}

function randomAbort(random: Random): AbortPlan {
  const roll = random();
  if (roll < 0.3) return { when: "no_signal" };
  if (roll < 0.45) return { when: "never" };
  if (roll < 0.55) return { when: "before" };
  return { when: "at", ms: grid(random) };
}

function randomBehaviour(random: Random, deadlineMs: number, abort: AbortPlan): Behaviour {
  const ending = pick(random, endings);
  const roll = random();
  if (roll < 0.2) return { way: "sync", ending };
  const bounded = endsInCase(deadlineMs) || abort.when === "at";
  if (roll < 0.35 && bounded) return { way: "hang" };
  const deaf = random() < 0.5;
  // Exactly at the deadline, or (when deaf) well past every deadline and abort of the case.
  if (roll < 0.5 && endsInCase(deadlineMs)) return { way: "after", ending, ms: deadlineMs, deaf };
  const ms = deaf && random() < 0.5 ? grid(random) * 3 : grid(random);
  return { way: "after", ending, ms, deaf };
}

export function randomCase(random: Random, seed: number): CasePlan {
  const setTimeoutMs = randomTimeout(random, [undefined, "grid", 0]);
  const toolTimeoutMs = randomTimeout(random, [undefined, undefined, "grid", 0]);
  const maxStrayRuns = pick(random, [1, 1, 2, 3, 5, undefined]);
  const count = random() < 0.15 ? 20 + below(random, 30) : 1 + below(random, 10);
  const calls: CallPlan[] = [];
  for (let index = 0; index < count; index++) {
    const timeoutMs = randomTimeout(random, callTimeouts);
    const deadlineMs = timeoutMs ?? toolTimeoutMs ?? setTimeoutMs ?? 60_000;
    const abort = randomAbort(random);
    calls.push({
      index,
      launchMs: pick(random, [0, 0, 0, grid(random), 2 * grid(random)]),
      validInput: random() > 0.05,
      behaviour: randomBehaviour(random, deadlineMs, abort),
      timeoutMs,
      abort,
      deadlineMs,
    });
  }
  return { seed, setTimeoutMs, toolTimeoutMs, maxStrayRuns, calls };
}

/** What can end a started call's wait, at what time; at the same millisecond the lower rank comes first. */
export interface CallEvent {
  readonly event: "abort" | "handler" | "deadline";
  readonly at: number;
  /**
   * Timers due the same millisecond run in the order they were set: the caller's abort (set before
   * the call), the handler's own (set as it starts), the deadline (set once the handler returned).
   */
  readonly rank: number;
}

/** The events that can answer a started call whose handler is still going after `execute` returned. */
export function callEvents(call: CallPlan): CallEvent[] {
  const events: CallEvent[] = [];
  if (call.abort.when === "at") events.push({ event: "abort", at: call.abort.ms, rank: 0 });
  if (call.behaviour.way === "after") events.push({ event: "handler", at: call.behaviour.ms, rank: 1 });
  if (endsInCase(call.deadlineMs)) events.push({ event: "deadline", at: call.deadlineMs, rank: 2 });
  return events.sort((a, b) => a.at - b.at || a.rank - b.rank);
}

/** What a call answers: a value, a code, or a rejection (an interrupt passes through `call`). */
export type Expected =
  | { readonly ok: true; readonly output: unknown }
  | { readonly ok: false; readonly code: string }
  | { readonly rejects: true };

/** The answer of a handler that ended its own way. */
export function endingAnswer(ending: Ending, index: number): Expected {
  switch (ending) {
    case "value":
      return { ok: true, output: { n: index } };
    case "plain_error":
    case "thrown_value":
      return { ok: false, code: "tool_failed" };
    case "coded_error":
      return { ok: false, code: "not_found" };
    case "bad_output":
      return { ok: false, code: "invalid_output" };
    case "interrupt":
      return { rejects: true };
  }
}

/** The answer an event gives. */
export function eventAnswer(event: CallEvent["event"], call: CallPlan): Expected {
  if (event === "abort") return { ok: false, code: "aborted" };
  if (event === "deadline") return { ok: false, code: "timeout" };
  if (call.behaviour.way !== "after") throw new Error("only a handler that ends by itself answers so");
  return endingAnswer(call.behaviour.ending, call.index);
}
