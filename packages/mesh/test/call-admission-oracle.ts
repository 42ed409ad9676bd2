/**
 * The oracle of `call-admission.property.test.ts`: what a round of calls to a node with small bounds
 * (ADR 0214), resent when refused (ADR 0215), must have done, read from three sides — the client's
 * answers, a spy connection's view of each send and each reply, and the runs the tool recorded.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "@nats-io/transport-node";
import type { ToolCallResult } from "@tackle/core";
import { callIdHeader, timeoutHeader } from "../src/nats/wire.ts";

/** One call of a round as planned: the tool's script, the caller's limit, its abort, its key. */
export interface PlannedCall {
  readonly key: string;
  readonly ms: number;
  /** How long it computes without yielding after its wait. */
  readonly spinMs: number;
  readonly limitMs: number;
  readonly fail: boolean;
  readonly ignoreCancel: boolean;
  /** When its caller aborts it, counted from its send; undefined never. */
  readonly abortAfterMs: number | undefined;
  readonly idempotent: boolean;
  /** A pause before it is sent. */
  readonly gapMs: number;
}

export interface AnsweredCall {
  readonly planned: PlannedCall;
  readonly sentAt: number;
  readonly answeredAt: number;
  readonly abortedAt: number | undefined;
  readonly result: ToolCallResult;
}

/** One run of the tool, as `fixtures/scripted.mjs` records it. */
export interface Run {
  readonly key: string;
  readonly callId: string;
  readonly order: number;
  readonly startedAt: number;
  readonly activeAtStart: number;
  readonly stoppedAt?: number;
  readonly stoppedBy?: "timeout" | "cancel";
  readonly givenMs?: number;
  readonly endedAt?: number;
}

export interface Recorded {
  readonly runs: Run[];
  readonly mostActive: number;
}

/** A send of a call as the spy saw it arrive, in arrival order. */
export interface Send {
  readonly callId: string;
  readonly key: string;
  readonly reply: string;
  /** When it arrived. */
  readonly at: number;
  /** The time limit it carried (`Tackle-Timeout-Ms`): the node's deadline is `at` plus this. */
  readonly timeoutMs: number;
}

export interface Spied {
  readonly sends: Send[];
  /** Replies seen per reply subject. */
  readonly replies: Map<string, number>;
}

/**
 * Watches `subject`'s requests and every inbox's replies on the node's connection: it sees each request
 * as the node reads it, in the node's order.
 */
export function spyOn(connection: NatsConnection, subject: string): Spied {
  const spied: Spied = { sends: [], replies: new Map() };
  connection.subscribe(subject, {
    callback: (error, message) => {
      if (error !== null || message.reply === undefined) return;
      const { key } = message.json<{ key: string }>();
      spied.sends.push({
        callId: message.headers?.get(callIdHeader) ?? "",
        key,
        reply: message.reply,
        at: performance.now(),
        timeoutMs: Number(message.headers?.get(timeoutHeader)),
      });
    },
  });
  connection.subscribe("_INBOX.>", {
    callback: (error, message) => {
      if (error === null) spied.replies.set(message.subject, (spied.replies.get(message.subject) ?? 0) + 1);
    },
  });
  return spied;
}

export interface Round {
  readonly round: number;
  readonly bounds: { readonly concurrent: number; readonly waiting: number };
  /** How late past its limit (or its abort) an answer may come. */
  readonly graceMs: number;
  /** How long after its limit was spent on the node a run may still start (the spy reads before the node). */
  readonly slackMs: number;
  /** The client sends a refused call again. */
  readonly resends: boolean;
  readonly answered: readonly AnsweredCall[];
  readonly sends: readonly Send[];
  readonly replies: ReadonlyMap<string, number>;
  readonly runs: readonly Run[];
}

/** Checks one round; returns how many runs it had and how late past its limit the latest answer came. */
export function checkRound(round: Round): { runs: number; latePastLimitMs: number } {
  const at = `round ${round.round}`;
  const runsByKey = new Map<string, Run>();
  for (const run of round.runs) {
    assert.ok(!runsByKey.has(run.key), `${at}: ${run.key} ran twice`);
    runsByKey.set(run.key, run);
    assert.ok(
      run.activeAtStart <= round.bounds.concurrent,
      `${at}: ${run.key} started with ${run.activeAtStart} runs active, over the bound of ${round.bounds.concurrent}`,
    );
  }
  checkArrivalOrder(round, runsByKey);
  const lastSends = new Map<string, Send>();
  for (const send of round.sends) lastSends.set(send.key, send);
  for (const send of round.sends) {
    assert.equal(round.replies.get(send.reply) ?? 0, 1, `${at}: a send of ${send.key} was not answered once`);
  }
  let latePastLimitMs = Number.NEGATIVE_INFINITY;
  for (const call of round.answered) {
    const run = runsByKey.get(call.planned.key);
    checkAnswer(round, call, run);
    checkTimeGiven(round, call, run, lastSends.get(call.planned.key));
    const aborted = !call.result.ok && call.result.error.code === "aborted";
    const due = aborted && call.abortedAt !== undefined ? call.abortedAt : call.sentAt + call.planned.limitMs;
    assert.ok(
      call.answeredAt <= due + round.graceMs,
      `${at}: ${call.planned.key} was answered ${(call.answeredAt - due).toFixed(0)} ms past its ${aborted ? "abort" : "limit"}`,
    );
    if (!aborted) latePastLimitMs = Math.max(latePastLimitMs, call.answeredAt - due);
  }
  return { runs: round.runs.length, latePastLimitMs };
}

/**
 * Runs start in the order their sends arrived: a call admitted at once never jumps a waiting one. A
 * call under an idempotency key first claims its key in the ledger, so its tool starts later than its
 * admission: left out of the order.
 */
function checkArrivalOrder(round: Round, runsByKey: ReadonlyMap<string, Run>): void {
  const arrival = new Map<string, number>();
  // A call runs from its last send: every earlier one was refused before it ran.
  round.sends.forEach((send, index) => {
    arrival.set(send.key, index);
  });
  const idempotent = new Set(
    round.answered.filter((call) => call.planned.idempotent).map((c) => c.planned.key),
  );
  const ordered = [...runsByKey.values()]
    .filter((run) => !idempotent.has(run.key))
    .sort((one, other) => one.order - other.order);
  let last = -1;
  let lastKey = "";
  for (const run of ordered) {
    const index = arrival.get(run.key);
    assert.ok(index !== undefined, `round ${round.round}: ${run.key} ran but the spy saw no send of it`);
    assert.ok(
      index > last,
      `round ${round.round}: ${run.key} (send ${index}) started before ${lastKey} (send ${last}), which arrived after it`,
    );
    last = index;
    lastKey = run.key;
  }
}

/**
 * A run starts before its caller's limit is spent on the node (the send's arrival plus the limit it
 * carried), and a run stopped by its limit was given at most what was left of it. A call under an
 * idempotency key claims its key before its tool starts: left out.
 */
function checkTimeGiven(
  round: Round,
  call: AnsweredCall,
  run: Run | undefined,
  send: Send | undefined,
): void {
  if (run === undefined || call.planned.idempotent) return;
  const at = `round ${round.round}: ${call.planned.key}`;
  assert.ok(send !== undefined, `${at} ran but the spy saw no send of it`);
  const deadline = send.at + send.timeoutMs;
  assert.ok(
    run.startedAt <= deadline + round.slackMs,
    `${at} started ${(run.startedAt - deadline).toFixed(1)} ms after its limit of ${send.timeoutMs} ms was spent on the node`,
  );
  if (run.stoppedBy !== "timeout") return;
  const given = run.givenMs ?? Number.NaN;
  assert.ok(given <= call.planned.limitMs + 1, `${at} was given ${given} ms, over its limit`);
  assert.ok(
    run.startedAt + given <= deadline + round.slackMs,
    `${at} was given ${given} ms when ${(deadline - run.startedAt).toFixed(1)} ms of its limit were left`,
  );
}

/** The call's answer fits what its run did, or that it did not run. */
function checkAnswer(round: Round, call: AnsweredCall, run: Run | undefined): void {
  const { key, fail } = call.planned;
  const at = `round ${round.round}: ${key}`;
  if (call.result.ok) {
    assert.ok(run !== undefined && !fail, `${at} answered ok without a run that succeeded`);
    assert.deepEqual(call.result.output, { key });
    return;
  }
  const { code, data } = call.result.error;
  switch (code) {
    case "tool_failed":
      assert.ok(run !== undefined && fail, `${at} answered tool_failed without failing`);
      return;
    case "timeout":
      assert.ok(
        run === undefined || run.stoppedBy === "timeout",
        `${at} ran, answered timeout, not stopped by it`,
      );
      return;
    case "aborted":
      assert.ok(call.abortedAt !== undefined, `${at} answered aborted, but its caller never aborted it`);
      return;
    case "overloaded":
      assert.equal(run, undefined, `${at} answered overloaded, yet it ran`);
      if (round.resends) {
        const attempts = (data as { attempts?: unknown } | undefined)?.attempts;
        assert.ok(typeof attempts === "number" && attempts >= 1, `${at}: overloaded without data.attempts`);
      }
      return;
    default:
      assert.fail(`${at} answered ${code}: ${call.result.error.message}`);
  }
}
