/**
 * A tool call's lifecycle, as a property against an oracle: thousands of random cases, each a tool set
 * of one tool called several times (many at once, so that its stray-run bound is crossed and recovers),
 * on real timers of a few milliseconds (`test/support/call-lifecycle-plans.ts` draws the plans). A
 * handler resolves or fails (a plain error, a coded one, a thrown non-Error, an output its schema
 * refuses, an interrupt) at once or after some milliseconds — exactly at the deadline too — stopping
 * on its signal or ignoring it and ending later, or hangs until its signal aborts. A call has its own
 * time limit or the tool's or the set's (0, Infinity, a few ms, 60 s, 2^31 ms, 30 days), and a signal
 * aborted before the call, at some millisecond, never, or none.
 *
 * - Every call answers exactly once, within a deadline, with what the oracle predicts: refused
 *   `overloaded` iff the oracle's count of the tool's stray runs (handlers still going after their
 *   calls answered) is at `maxStrayRuns`, with that count in its data; else `invalid_input`; else
 *   `aborted` for a signal aborted before; else the handler's own answer when it ends before `execute`
 *   returns; else the first of the abort, the handler's end and the deadline. At the same millisecond
 *   the caller's abort comes first, then the handler, then the deadline: timers due together run in
 *   the order they were set, and the deadline is set last, when the handler has started.
 * - A handler never runs for a refused call or one aborted before it; a handler whose call answered
 *   `timeout` or `aborted` saw its signal aborted by then, and one that stops on its signal has
 *   stopped before the next turn of the event loop; one that ignores it is still going (a stray run).
 * - One span per call, with an error status iff the call answered an error (an interrupt never is).
 * - No unhandled rejection, and once every call answered and every handler ended, no timer is left.
 *
 * Timers due at different milliseconds can run out of order when the event loop was late (Node runs a
 * late list whole before the next); a call answered then by another event already due counts as
 * late, and is accepted only so. `TACKLE_PROPERTY_ROUNDS` sets the number of cases (default 2,000);
 * `TACKLE_PROPERTY_SEED` replays one.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { isDeepStrictEqual } from "node:util";
import { SpanStatusCode, trace } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { seededRandom } from "@tackle/test-support";
import { z } from "zod";
import { controlFlowBrand } from "../src/errors/control-flow.ts";
import { ToolError } from "../src/errors/tool-error.ts";
import { defineTool } from "../src/tool/define-tool.ts";
import { createToolSet, type ToolCallResult } from "../src/tool-set/create-tool-set.ts";
import {
  type CallPlan,
  type CasePlan,
  callEvents,
  type Ending,
  type Expected,
  endingAnswer,
  eventAnswer,
  randomCase,
} from "./support/call-lifecycle-plans.ts";

const rounds = Number(process.env.TACKLE_PROPERTY_ROUNDS ?? 2_000);
const seeds =
  process.env.TACKLE_PROPERTY_SEED === undefined
    ? Array.from({ length: rounds }, (_, index) => 566_000 + index)
    : [Number(process.env.TACKLE_PROPERTY_SEED)];
/** Cases run at once: each its own tool set, so they share only the event loop. */
const casesAtOnce = 8;
/** How long a batch may take to answer every call and end every handler. */
const batchDeadlineMs = 10_000;

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
before(() => trace.setGlobalTracerProvider(provider));
after(() => trace.disable());

/** What the test saw of one call. */
interface Seen {
  readonly plan: CallPlan;
  readonly callId: string;
  /** The oracle's count of the tool's stray runs when the call started. */
  straysAtStart?: number;
  started: boolean;
  ended: boolean;
  signal?: AbortSignal;
  answered: boolean;
  result?: ToolCallResult;
  rejection?: unknown;
  elapsedMs?: number;
  /** At the answer: whether the handler was still going, and whether its signal was aborted. */
  handlerGoingAtAnswer?: boolean;
  signalAbortedAtAnswer?: boolean | undefined;
  /** A handler that stops on its signal: whether it had stopped by the next turn after the answer. */
  stoppedByNextTurn?: boolean;
}

const pause = Object.assign(new Error("paused"), { [controlFlowBrand]: true });

/** Ends a handler its planned way: returns or throws. */
function end(ending: Ending, index: number): unknown {
  switch (ending) {
    case "value":
      return { n: index };
    case "bad_output":
      return { n: "not a number" };
    case "plain_error":
      throw new Error("boom");
    case "coded_error":
      throw new ToolError("not_found", "no such thing");
    case "thrown_value":
      throw { reason: "a plain object" };
    case "interrupt":
      throw pause;
  }
}

function lifecycleTool(plan: CasePlan, seen: readonly Seen[]) {
  return defineTool({
    name: "lifecycle",
    description: "Does what its call's plan says.",
    input: z.object({ index: z.number() }),
    output: z.object({ n: z.number() }),
    ...(plan.toolTimeoutMs === undefined ? {} : { timeoutMs: plan.toolTimeoutMs }),
    execute: ({ index }, context) => {
      const call = seen[index] as Seen;
      call.started = true;
      call.signal = context.signal;
      const behaviour = call.plan.behaviour;
      if (behaviour.way === "sync") {
        call.ended = true;
        return end(behaviour.ending, index) as { n: number };
      }
      return new Promise<{ n: number }>((resolve, reject) => {
        const finish = (settle: () => void) => {
          if (call.ended) return;
          call.ended = true;
          settle();
        };
        let timer: NodeJS.Timeout | undefined;
        if (behaviour.way === "after") {
          timer = setTimeout(() => {
            finish(() => {
              try {
                resolve(end(behaviour.ending, index) as { n: number });
              } catch (error) {
                reject(error);
              }
            });
          }, behaviour.ms);
        }
        if (behaviour.way === "hang" || !behaviour.deaf) {
          context.signal.addEventListener(
            "abort",
            () => {
              clearTimeout(timer);
              finish(() => reject(context.signal.reason));
            },
            { once: true },
          );
        }
      });
    },
  });
}

/** The test's own timers still to fire (the callers' aborts). */
let testTimers = 0;

function signalFor(call: CallPlan): AbortSignal | undefined {
  switch (call.abort.when) {
    case "no_signal":
      return undefined;
    case "never":
      return new AbortController().signal;
    case "before":
      return AbortSignal.abort();
    case "at": {
      const controller = new AbortController();
      testTimers += 1;
      setTimeout(() => {
        testTimers -= 1;
        controller.abort();
      }, call.abort.ms);
      return controller.signal;
    }
  }
}

/** Runs one case: its calls started at their times; resolves once every call answered and every handler ended. */
function runCase(plan: CasePlan, seen: Seen[]): void {
  const tools = createToolSet([lifecycleTool(plan, seen)], {
    ...(plan.setTimeoutMs === undefined ? {} : { timeoutMs: plan.setTimeoutMs }),
    ...(plan.maxStrayRuns === undefined ? {} : { maxStrayRuns: plan.maxStrayRuns }),
  });
  const strays = () => seen.filter((call) => call.started && call.answered && !call.ended).length;
  const launch = (call: Seen) => {
    call.straysAtStart = strays();
    const started = performance.now();
    const signal = signalFor(call.plan);
    const answer = tools.call(
      "lifecycle",
      // Arguments the tool's schema refuses, for an `invalid_input` call.
      (call.plan.validInput ? { index: call.plan.index } : { index: "x" }) as { index: number },
      {
        callId: call.callId,
        ...(signal === undefined ? {} : { signal }),
        ...(call.plan.timeoutMs === undefined ? {} : { timeoutMs: call.plan.timeoutMs }),
      },
    );
    const answered = () => {
      if (call.answered) throw new Error(`call ${call.callId} answered twice`);
      call.answered = true;
      call.elapsedMs = performance.now() - started;
      call.handlerGoingAtAnswer = call.started && !call.ended;
      call.signalAbortedAtAnswer = call.signal?.aborted;
      if (call.started && call.plan.behaviour.way !== "sync") {
        setImmediate(() => {
          call.stoppedByNextTurn = call.ended;
        });
      }
    };
    answer.then(
      (result) => {
        call.result = result;
        answered();
      },
      (error: unknown) => {
        call.rejection = error;
        answered();
      },
    );
  };
  const starts = new Map<number, Seen[]>();
  for (const call of seen) starts.set(call.plan.launchMs, [...(starts.get(call.plan.launchMs) ?? []), call]);
  for (const [launchMs, calls] of starts) {
    testTimers += 1;
    setTimeout(() => {
      testTimers -= 1;
      for (const call of calls) launch(call);
    }, launchMs);
  }
}

/** What the oracle predicts for a call, and the answers it accepts when the event loop was late. */
function predict(call: Seen, maxStrayRuns: number): { expected: Expected; late: Expected[]; runs: boolean } {
  const plan = call.plan;
  if ((call.straysAtStart ?? 0) >= maxStrayRuns) return { expected: refused, late: [], runs: false };
  if (!plan.validInput) return { expected: { ok: false, code: "invalid_input" }, late: [], runs: false };
  if (plan.abort.when === "before")
    return { expected: { ok: false, code: "aborted" }, late: [], runs: false };
  if (plan.behaviour.way === "sync") {
    return { expected: endingAnswer(plan.behaviour.ending, plan.index), late: [], runs: true };
  }
  const events = callEvents(plan);
  const first = events[0];
  if (first === undefined) throw new Error(`call ${call.callId} has nothing to end it`);
  // Late: another event at a later millisecond was due by the time the call answered.
  const elapsed = call.elapsedMs ?? 0;
  const late = events.filter((event) => event.at !== first.at && event.at <= elapsed + 1);
  return {
    expected: eventAnswer(first.event, plan),
    late: late.map((event) => eventAnswer(event.event, plan)),
    runs: true,
  };
}

const refused: Expected = { ok: false, code: "overloaded" };

function answerOf(call: Seen): Expected {
  if (call.rejection !== undefined) return { rejects: true };
  const result = call.result;
  if (result === undefined) return { ok: false, code: "(no answer)" };
  return result.ok ? { ok: true, output: result.output } : { ok: false, code: result.error.code };
}

const same = (a: Expected, b: Expected) => JSON.stringify(a) === JSON.stringify(b);

/** The oracle's verdict on one call: the faults found, each a line. */
function check(plan: CasePlan, call: Seen, counts: { late: number }): string[] {
  const faults: string[] = [];
  const maxStrayRuns = plan.maxStrayRuns ?? 64;
  const { expected, late, runs } = predict(call, maxStrayRuns);
  const answer = answerOf(call);
  if (!same(answer, expected)) {
    if (late.some((accepted) => same(answer, accepted))) counts.late += 1;
    else faults.push(`answered ${JSON.stringify(answer)}, expected ${JSON.stringify(expected)}`);
  }
  if (call.rejection !== undefined && call.rejection !== pause) faults.push("rejected with something else");
  if (call.started !== runs) faults.push(`handler ${call.started ? "ran" : "did not run"}`);
  if (same(expected, refused) && call.result !== undefined && !call.result.ok) {
    const data = { tool: "lifecycle", strayRuns: call.straysAtStart, maxStrayRuns };
    if (!isDeepStrictEqual(call.result.error.data, data))
      faults.push(`refusal data ${JSON.stringify(call.result.error.data)}, expected ${JSON.stringify(data)}`);
  }
  const interrupted = call.result?.ok === false && ["timeout", "aborted"].includes(call.result.error.code);
  if (interrupted && call.started) {
    if (call.signalAbortedAtAnswer !== true)
      faults.push("its handler's signal was not aborted by the answer");
    const behaviour = call.plan.behaviour;
    const deaf = behaviour.way === "after" && behaviour.deaf;
    if (deaf && call.handlerGoingAtAnswer !== true) faults.push("answered only once its deaf handler ended");
    if (!deaf && call.stoppedByNextTurn !== true) faults.push("its handler had not stopped by the next turn");
  }
  return faults;
}

/** Waits, to a deadline, until every call answered, every handler ended and the test's timers fired. */
async function settled(seen: readonly Seen[]): Promise<void> {
  const deadline = performance.now() + batchDeadlineMs;
  const done = () =>
    testTimers === 0 &&
    seen.every(
      (call) =>
        call.answered &&
        (!call.started || call.ended) &&
        // The next turn after an answer, when it checks a started handler, has come.
        (!call.started || call.plan.behaviour.way === "sync" || call.stoppedByNextTurn !== undefined),
    );
  while (!done()) {
    if (performance.now() > deadline) {
      const stuck = seen.filter((call) => !call.answered || (call.started && !call.ended));
      assert.fail(
        `${stuck.length} calls not answered or handlers not ended: ${stuck.map((c) => c.callId).join(", ")}`,
      );
    }
    await sleep(2);
  }
}

const activeTimers = () =>
  process.getActiveResourcesInfo().filter((resource) => resource === "Timeout").length;

function newBatch(batchSeeds: readonly number[]) {
  return batchSeeds.map((seed) => {
    const plan = randomCase(seededRandom(seed), seed);
    const seen: Seen[] = plan.calls.map((call) => ({
      plan: call,
      callId: `${seed}-${call.index}`,
      started: false,
      ended: false,
      answered: false,
    }));
    return { plan, seen };
  });
}

type SpanFacts = { readonly code: number; readonly errorType: unknown };

/** The finished spans by call id. */
function spansByCall(): Map<string, SpanFacts[]> {
  const spans = new Map<string, SpanFacts[]>();
  for (const span of exporter.getFinishedSpans()) {
    const callId = String(span.attributes["gen_ai.tool.call.id"]);
    const facts = { code: span.status.code, errorType: span.attributes["error.type"] };
    spans.set(callId, [...(spans.get(callId) ?? []), facts]);
  }
  return spans;
}

/** One span per call, with an error status and `error.type` iff the call answered an error. */
function spanFaults(call: Seen, spans: readonly SpanFacts[]): string[] {
  const failed = call.result?.ok === false ? call.result.error.code : undefined;
  const [span] = spans;
  if (spans.length !== 1 || span === undefined) return [`${spans.length} spans`];
  if ((span.code === SpanStatusCode.ERROR) !== (failed !== undefined) || span.errorType !== failed) {
    return [`span ${JSON.stringify(span)} for ${failed ?? "no error"}`];
  }
  return [];
}

/** What the run did, reported so a reader sees the property reached every path. */
function tally(counts: Record<string, number>, call: Seen): void {
  const behaviour = call.plan.behaviour;
  const bump = (key: string, yes: boolean) => {
    if (yes) counts[key] = (counts[key] ?? 0) + 1;
  };
  const events = call.started ? callEvents(call.plan) : [];
  bump("calls", true);
  bump("started", call.started);
  bump("refused", call.result?.ok === false && call.result.error.code === "overloaded");
  bump("strays", behaviour.way === "after" && behaviour.deaf && call.handlerGoingAtAnswer === true);
  bump("ties", events.length > 1 && events[0]?.at === events[1]?.at);
}

test("every call answers once, as the oracle says, and leaves no stray it does not count", async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on("unhandledRejection", onUnhandled);
  const timersBefore = activeTimers();
  const faults: string[] = [];
  const counts: Record<string, number> = { late: 0 };
  try {
    for (let from = 0; from < seeds.length && faults.length <= 20; from += casesAtOnce) {
      exporter.reset();
      const batch = newBatch(seeds.slice(from, from + casesAtOnce));
      for (const { plan, seen } of batch) runCase(plan, seen);
      await settled(batch.flatMap(({ seen }) => seen));
      // The span exporter hands each span on from a 0 ms timer of its own.
      await sleep(5);
      const spans = spansByCall();
      for (const { plan, seen } of batch) {
        for (const call of seen) {
          tally(counts, call);
          const found = [
            ...check(plan, call, counts as { late: number }),
            ...spanFaults(call, spans.get(call.callId) ?? []),
          ];
          for (const fault of found) {
            faults.push(`seed ${plan.seed} call ${call.plan.index} ${JSON.stringify(call.plan)}: ${fault}`);
          }
        }
      }
      const timersLeft = activeTimers() - timersBefore;
      if (timersLeft !== 0)
        faults.push(`seeds from ${seeds[from]}: ${timersLeft} timers left once all ended`);
    }
  } finally {
    process.off("unhandledRejection", onUnhandled);
  }
  assert.deepEqual(faults.slice(0, 10), []);
  assert.deepEqual(unhandled, []);
  if (seeds.length >= 100) {
    // The run crossed the bound, made strays and saw them end, and hit ties at the deadline.
    assert.ok(
      (counts.refused ?? 0) > 0 && (counts.strays ?? 0) > 0 && (counts.ties ?? 0) > 0,
      JSON.stringify(counts),
    );
  }
  process.stdout.write(`# call lifecycle: ${JSON.stringify({ cases: seeds.length, ...counts })}\n`);
});
