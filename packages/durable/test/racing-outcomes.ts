/**
 * What the concurrent-drivers rounds (`racing-round.ts`) count, the operations they send and how those
 * may end, and the small helpers that judge them.
 */
import assert from "node:assert/strict";
import { DurableError } from "@tackle/durable";

/** What the rounds exercised, printed, and checked against vacuity at the end. */
export interface Totals {
  rounds: number;
  starts: number;
  /** Batches that sent the same start (thread and run id) two or three times at once. */
  startsRaced: number;
  followUpRuns: number;
  resumes: number;
  /** Batches that sent the same answers two or three times at once. */
  resumesRepeated: number;
  /** Batches where two runners sent different answers to the same interrupts at once. */
  conflictsRaced: number;
  /** Resumes told `answer_conflict`, each the loser of a race. */
  conflictLosers: number;
  /** Races won by the answers sent second (so neither side always wins). */
  conflictsWonBySecond: number;
  gets: number;
  freezes: number;
  /** Bare resumes sent to take a frozen driver's run over. */
  takeoverTries: number;
  /** Tries told `run_active`: the lease had not run out, or another runner had just taken the run. */
  refusedActive: number;
  /** `run_recovered` frames: takeovers that happened (by a bare resume or a sweep). */
  takeovers: number;
  sweepTakeovers: number;
  /** Rounds in which two or more runners' sweeps found the run stale at once. */
  sweepsRaced: number;
  fencedWrites: number;
  effects: number;
  /** Side effects beyond those of the program driven alone: a frozen driver's step run again. */
  reruns: number;
  /** Of those, run by a frozen driver after its run was taken over (a later attempt had begun). */
  overtaken: number;
}

export const emptyTotals = (): Totals => ({
  rounds: 0,
  starts: 0,
  startsRaced: 0,
  followUpRuns: 0,
  resumes: 0,
  resumesRepeated: 0,
  conflictsRaced: 0,
  conflictLosers: 0,
  conflictsWonBySecond: 0,
  gets: 0,
  freezes: 0,
  takeoverTries: 0,
  refusedActive: 0,
  takeovers: 0,
  sweepTakeovers: 0,
  sweepsRaced: 0,
  fencedWrites: 0,
  effects: 0,
  reruns: 0,
  overtaken: 0,
});

export type Outcome =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly error: unknown };

export type Kind = "start" | "resume" | "takeover" | "get";

/** One operation sent, and how it ended. */
export interface Sent {
  readonly kind: Kind;
  readonly runner: number;
  /** For a resume: which of the batch's answer sets it carried. */
  readonly answers?: "first" | "second";
  outcome?: Outcome;
}

/** The codes an operation may be told; anything else (or an error that is not a DurableError) is a defect. */
export const allowedCodes: Record<Kind, readonly string[]> = {
  start: [],
  resume: [],
  // Refused while the lease runs, or when another runner took the run first; before the run exists.
  takeover: ["run_active", "not_found"],
  get: [],
};

/** An answer other than `answer`: an approval decided the other way, another text. */
export function otherAnswer(id: string, answer: unknown): unknown {
  if (typeof answer === "string") return `other-${id}`;
  const approved = (answer as { approved?: boolean }).approved === true;
  return approved ? { approved: false, reason: "changed my mind" } : { approved: true };
}

export function describeError(error: unknown): string {
  return DurableError.isInstance(error) ? `${error.code}: ${error.message}` : `an untyped ${String(error)}`;
}

export function isDeepEqual(a: unknown, b: unknown): boolean {
  try {
    assert.deepStrictEqual(a, b);
    return true;
  } catch {
    return false;
  }
}

export async function withDeadline<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${message} (${ms} ms)`)), ms);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}
