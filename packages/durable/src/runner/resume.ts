/**
 * Resuming a run: answering a paused run's interrupts, replays of a resume, and taking over a run left
 * `running` by a driver that died (with the poison-run limit).
 */
import { randomUUID } from "node:crypto";
import { toToolError } from "@tackle/core";
import { decodeValue, encodeValue } from "../codec/codec.ts";
import { DurableError } from "../errors/durable-error.ts";
import type { InterruptRequest } from "../interrupt/interrupt.ts";
import type { Frame, RunRecord } from "../store/durable-store.ts";
import { checkAnswer, expiredAnswer, expiryOf, withEditFingerprint } from "./answers.ts";
import { drive } from "./drive.ts";
import { idleLaunch } from "./launch.ts";
import type { RunSnapshot } from "./run-snapshot.ts";
import type { Answers, Launched, ResumeOptions } from "./runner-api.ts";
import { clientRunData, type RunnerState, storedSnapshot, track } from "./runner-state.ts";

function runActiveHere(threadId: string): DurableError {
  return new DurableError(
    "run_active",
    `Thread "${threadId}" is running in this process; wait for it to pause`,
  );
}

export async function launchResume<State extends object>(
  state: RunnerState,
  threadId: string,
  given: Answers = {},
  resumeOptions: ResumeOptions = {},
): Promise<Launched<State>> {
  const driven = state.active.has(threadId);
  if (driven && Object.keys(given).length === 0) throw runActiveHere(threadId);
  const run = await state.store.getRun(threadId);
  if (run === undefined) throw DurableError.notFound("run", threadId, `No run for thread "${threadId}"`);
  if (run.status === "cancelled" && Object.keys(given).length > 0) {
    // Its pending approvals were answered as cancelled: another answer is not a conflict, it is late.
    throw new DurableError(
      "run_cancelled",
      `Thread "${threadId}"'s run ${run.runId} was cancelled; it takes no answers (start a new run)`,
      { data: { runId: run.runId, status: run.status } },
    );
  }
  const { stored, stepsDone } = await readAnswers(state, threadId);
  const fresh = freshAnswers(given, stored);
  if (driven) {
    // A resume replayed (its answers all given already) while the run it resumed runs here: harmless.
    if (fresh.size === 0) return idleLaunch<State>(state, threadId, run.runId);
    throw runActiveHere(threadId);
  }
  if (run.status === "paused") return resumePaused<State>(state, run, given, fresh, stored, resumeOptions);
  if (fresh.size > 0) {
    throw new DurableError(
      "run_not_paused",
      `Thread "${threadId}" is ${run.status}, not paused; nothing to answer`,
      {
        data: { status: run.status },
      },
    );
  }
  // Answers already given (a replayed or raced resume) never take a run over; only a bare resume does.
  if (run.status !== "running" || Object.keys(given).length > 0)
    return idleLaunch<State>(state, threadId, run.runId);
  return takeOver<State>(state, run, stepsDone);
}

/**
 * Resumes a paused run with no answers, as its expiry does: its expired approvals are answered as such.
 * Never a takeover: a run not paused any more (answered, cancelled, resumed by another runner) is left
 * alone, and of two runners firing the same expiry one claims the run (`ifOwner`), the other stops.
 */
export async function resumeAtExpiry(state: RunnerState, threadId: string): Promise<Launched<object>> {
  const run = await state.store.getRun(threadId);
  if (run === undefined || run.status !== "paused" || state.active.has(threadId)) {
    return idleLaunch(state, threadId, run?.runId ?? "");
  }
  const { stored } = await readAnswers(state, threadId);
  return resumePaused(state, run, {}, new Map(), stored, {});
}

/** The answers the journal holds, and how many steps have an outcome (not a retry's failed try). */
async function readAnswers(state: RunnerState, threadId: string) {
  const stored = new Map<string, unknown>();
  let stepsDone = 0;
  for (const record of await state.store.readJournal(threadId)) {
    if (record.key.startsWith("answer:")) stored.set(record.key.slice(7), record.value);
    else if ((record.state === "done" || record.state === "failed") && !record.key.includes("@")) stepsDone++;
  }
  return { stored, stepsDone };
}

/** The given answers not in the journal yet, encoded; one that differs from a stored answer conflicts. */
function freshAnswers(given: Answers, stored: ReadonlyMap<string, unknown>): Map<string, string> {
  const fresh = new Map<string, string>();
  for (const [id, answer] of Object.entries(given)) {
    const text = encodeValue(withEditFingerprint(answer), `the answer to "${id}"`);
    const previous = stored.get(id);
    if (previous === undefined) fresh.set(id, text);
    else if (previous !== text) {
      throw new DurableError("answer_conflict", `The interrupt "${id}" was already answered differently`, {
        data: { id },
      });
    }
  }
  return fresh;
}

async function resumePaused<State extends object>(
  state: RunnerState,
  run: RunRecord,
  given: Answers,
  fresh: Map<string, string>,
  stored: ReadonlyMap<string, unknown>,
  resumeOptions: ResumeOptions,
): Promise<Launched<State>> {
  const { threadId } = run;
  const open = decodeValue(run.interrupts, "interrupts") as InterruptRequest[];
  const openIds = new Set(open.map((entry) => entry.id));
  const unknown = [...fresh.keys()].filter((id) => !openIds.has(id));
  if (unknown.length > 0) {
    throw new DurableError(
      "unknown_interrupt",
      `No open interrupt ${unknown.map((id) => `"${id}"`).join(", ")}`,
      {
        data: { unknown, open: [...openIds] },
      },
    );
  }
  const now = Date.now();
  for (const entry of open) {
    const text = fresh.get(entry.id);
    if (text !== undefined) checkAnswer(entry, decodeValue(text), now);
    else if (!stored.has(entry.id) && (expiryOf(entry) ?? Number.POSITIVE_INFINITY) <= now) {
      // Nobody answered in time: the approval is answered as expired, so the run is not left hanging.
      fresh.set(entry.id, encodeValue(expiredAnswer(entry), `the expiry of "${entry.id}"`));
    }
  }
  // Only old answers again: a replayed resume, harmless.
  if (fresh.size === 0) return idleLaunch<State>(state, threadId, run.runId);
  const missing = [...openIds].filter((id) => !fresh.has(id));
  if (missing.length > 0) {
    throw new DurableError(
      "unanswered_interrupts",
      `Every open interrupt must be answered; missing ${missing.map((id) => `"${id}"`).join(", ")}`,
      { data: { missing } },
    );
  }
  // Claimed only as read (`ifOwner`): paused at these interrupts, claimed by nobody since. A resume that
  // read the run before a racing one claimed it would else find it paused again at the next interrupts
  // and write its answers over the ones that run went on with (ADR 0119).
  const claimed = await state.store.claimRun(
    threadId,
    randomUUID(),
    ["paused"],
    {
      journal: [...fresh].map(([id, text]) => ({
        key: `answer:${id}`,
        name: "answer",
        state: "done",
        attempt: 1,
        value: text,
      })),
      run: { status: "running", interrupts: encodeValue([], "interrupts") },
    },
    { ifOwner: run.owner },
  );
  // Lost the race: read again — the same answers are a replay, others a conflict. A bare resume (an
  // expiry) lost to another claim that drives the run now: never a takeover of it.
  if (claimed === undefined) {
    if (Object.keys(given).length === 0) return idleLaunch<State>(state, threadId, run.runId);
    return launchResume(state, threadId, given, resumeOptions);
  }
  // Answered: its expiry has nothing left to resume (a pause at the next interrupts schedules anew).
  state.expiries.drop(threadId);
  const resumed: Frame = {
    type: "run_resumed",
    seq: 0,
    data: { answered: [...fresh.keys()], ...clientRunData(resumeOptions.clientRun) },
  };
  return {
    threadId,
    runId: run.runId,
    firstSeq: claimed.lastSeq + 1,
    finished: track(state, threadId, drive<State>(state, claimed.run, claimed.lastSeq, [resumed])),
  };
}

/**
 * Left running by a process that died: take it over (fencing out the old owner, if it still lives),
 * but only once the run's last write is older than the lease, judged by the store's clock in the
 * claiming transaction (the database's on PostgreSQL), so machines' clocks never decide it.
 */
async function takeOver<State extends object>(
  state: RunnerState,
  run: RunRecord,
  stepsDone: number,
): Promise<Launched<State>> {
  const { threadId } = run;
  const takeovers = await takeoversOf(state, threadId, stepsDone);
  const owner = randomUUID();
  const claimed = await state.store.claimRun(
    threadId,
    owner,
    ["running"],
    {},
    { staleAfterMs: state.leaseMs },
  );
  if (claimed === undefined) return idleLaunch<State>(state, threadId, run.runId);
  const firstSeq = claimed.lastSeq + 1;
  if (takeovers >= state.maxTakeovers) {
    // A poison run: every driver so far died in it. End it, explained, rather than run its step again.
    const failed = failPoisoned<State>(state, claimed.run, owner, claimed.lastSeq, takeovers);
    return { threadId, runId: run.runId, firstSeq, finished: track(state, threadId, failed) };
  }
  const recovered: Frame = { type: "run_recovered", seq: 0, data: { stepsDone } };
  const finished = drive<State>(state, claimed.run, claimed.lastSeq, [recovered]);
  return { threadId, runId: run.runId, firstSeq, finished: track(state, threadId, finished) };
}

/**
 * How many times in a row the thread's latest run was taken over with no progress since: its
 * `run_recovered` frames after its last progress mark (its `run_started`, a resume with answers, a
 * pause, a node completed), where a takeover that found more steps done than the one before it
 * counts from 1 again, and none count when steps completed since the last takeover (`stepsDone`
 * now above the one it recorded).
 */
async function takeoversOf(state: RunnerState, threadId: string, stepsDone: number): Promise<number> {
  const marks = await state.store.readFrames(threadId, 0, 1_000_000, [
    "run_started",
    "run_recovered",
    "run_resumed",
    "interrupt",
    "node_completed",
  ]);
  let count = 0;
  let lastSteps: number | undefined;
  for (const frame of marks) {
    if (frame.type !== "run_recovered") {
      count = 0;
      lastSteps = undefined;
      continue;
    }
    const steps = (frame.data as { stepsDone?: unknown } | null)?.stepsDone;
    const recorded = typeof steps === "number" ? steps : undefined;
    count = recorded !== undefined && lastSteps !== undefined && recorded > lastSteps ? 1 : count + 1;
    lastSteps = recorded;
  }
  return lastSteps !== undefined && stepsDone > lastSteps ? 0 : count;
}

/** Ends a run taken over once too often as `failed` (`takeover_limit`), writing as its new owner. */
async function failPoisoned<State extends object>(
  state: RunnerState,
  run: RunRecord,
  owner: string,
  lastSeq: number,
  takeovers: number,
): Promise<RunSnapshot<State>> {
  const { threadId } = run;
  const { maxTakeovers } = state;
  const inFlight = (await state.store.readJournal(threadId)).filter((record) => record.state === "started");
  const step = inFlight.at(-1)?.name ?? null;
  const where = `${run.node === null ? "" : ` in node "${run.node}"`}${step === null ? "" : `, step "${step}"`}`;
  const error = new DurableError(
    "takeover_limit",
    `Run taken over ${takeovers} time${takeovers === 1 ? "" : "s"} in a row with no progress (maxTakeovers ${maxTakeovers}) and its driver stopped again${where}; not running it again`,
    { data: { takeovers, maxTakeovers, node: run.node, step } },
  );
  const payload = {
    ...toToolError(run.graph, error).toJSON(),
    ...(run.node === null ? {} : { node: run.node }),
  };
  state.logger.error("durable run failed: taken over too many times", { threadId, error: payload });
  await state.store.commit(threadId, owner, {
    frames: [{ type: "run_failed", seq: lastSeq + 1, data: { error: payload } }],
    run: { status: "failed", error: JSON.stringify(payload) },
  });
  state.landed.emit(threadId);
  return storedSnapshot<State>(state, threadId);
}
