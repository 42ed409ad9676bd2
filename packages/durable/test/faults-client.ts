/**
 * What the database-fault properties share (`postgres-faults.property.test.ts`,
 * `sqlite-lock.property.test.ts`): a client that does what the durable README tells a user to do when a
 * call fails (read the run, send what it calls for, send a call told `unavailable` again), the totals a
 * run of a property reports, and the oracle's last word on a program once the database is sound again.
 */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import {
  DurableError,
  type DurableStore,
  decodeValue,
  type Graph,
  type Runner,
  type RunSnapshot,
} from "@tackle/durable";
import { underLoadMs } from "@tackle/test-support";
import { settle } from "./postgres-faults.ts";
import {
  answerFor,
  cardStatuses,
  type driveAlone,
  initialState,
  type Oracle,
  type State,
} from "./property-programs.ts";

export interface Totals<Faults = unknown> {
  faults: Faults;
  calls: number;
  /** Calls sent again at once after `unavailable`. */
  sentAgain: number;
  refused: Record<string, number>;
  effects: number;
  reruns: number;
  overtaken: number;
  /** Takeovers of a run left `running` (its `run_recovered` frames), by a sweep or a bare resume. */
  takeovers: number;
  healMs: number[];
}

/** What a client knows of the thread it drives. */
export interface Client {
  readonly graph: Graph<State>;
  readonly threadId: string;
  /** The thread's runs, one after another. */
  readonly runIds: readonly string[];
  readonly random: () => number;
  readonly violations: string[];
  readonly totals: Totals;
}

/**
 * One client's move on the thread, through `runner`; `true` once the last run completed. It reads the
 * run and sends what it calls for; told `unavailable`, it may send the same call again at once, as the
 * README says it safely can, before it reads again.
 */
export async function move(runner: Runner, client: Client): Promise<boolean> {
  const { graph, threadId, runIds, violations, totals } = client;
  const deadline = underLoadMs(15_000);
  totals.calls += 1;
  const read = await settle(() => runner.get<State>(threadId), deadline, "get", violations);
  if (!read.ok) return refused(read.error, totals);
  const run = read.value;
  let call: () => Promise<RunSnapshot<State>>;
  let what: string;
  const next = run === undefined ? runIds[0] : runIds[runIds.indexOf(run.runId) + 1];
  if (run === undefined || (run.status === "completed" && next !== undefined)) {
    // The thread's first run, or its next once the one before completed.
    call = () => runner.start(graph, initialState(), { threadId, runId: next as string });
    what = `start ${next}`;
  } else if (run.status === "paused") {
    const answers = Object.fromEntries(
      run.interrupts.map((open) => [open.id, answerFor(open.id, open.request)]),
    );
    call = () => runner.resume<State>(threadId, answers);
    what = "resume with answers";
  } else if (run.status === "running") {
    call = () => runner.resume<State>(threadId);
    what = "bare resume";
  } else if (run.status === "completed") {
    return true;
  } else {
    violations.push(`the run ended ${run.status}: ${JSON.stringify(run.error)}`);
    return true;
  }
  totals.calls += 1;
  let outcome = await settle(call, deadline, what, violations);
  for (
    let again = 0;
    !outcome.ok && unavailable(outcome.error) && again < 3 && client.random() < 0.5;
    again += 1
  ) {
    totals.calls += 1;
    totals.sentAgain += 1;
    outcome = await settle(call, deadline, `${what} sent again`, violations);
  }
  if (!outcome.ok) return refused(outcome.error, totals);
  return outcome.value.status === "completed" && outcome.value.runId === runIds.at(-1);
}

const unavailable = (error: unknown) => DurableError.isInstance(error) && error.code === "unavailable";

/** A refused call: the client waits as told (`retryAfterMs`), briefly otherwise, and goes on. */
export async function refused(error: unknown, totals: Totals): Promise<false> {
  const code = DurableError.isInstance(error) ? error.code : "untyped";
  totals.refused[code] = (totals.refused[code] ?? 0) + 1;
  const after = DurableError.isInstance(error)
    ? (error.data as { retryAfterMs?: number } | undefined)?.retryAfterMs
    : undefined;
  await sleep(Math.min(after ?? 25, 200));
  return false;
}

/** The totals of a property's run before its first program. */
export const emptyTotals = <Faults>(faults: Faults): Totals<Faults> => ({
  faults,
  calls: 0,
  sentAgain: 0,
  refused: {},
  effects: 0,
  reruns: 0,
  overtaken: 0,
  takeovers: 0,
  healMs: [],
});

/**
 * Once healed, as the database holds it: the run completed with the state and tool cards of the same
 * program run without faults (`reference`), its frames' seqs are 1, 2, 3… with none missing, every step
 * that ran finished, and no driver ran a step after a takeover more often than there were takeovers
 * (one in-flight step per driver overtaken, no more).
 */
export async function checkEnd(
  where: string,
  direct: DurableStore,
  threadId: string,
  oracle: Oracle,
  reference: Awaited<ReturnType<typeof driveAlone>>,
  totals: Totals,
): Promise<void> {
  const run = await direct.getRun(threadId);
  assert.ok(run !== undefined && run.status === "completed", `${where}: the run ended ${run?.status}`);
  const frames = await direct.readFrames(threadId, 0, 100_000);
  assert.deepEqual(
    frames.map((frame) => frame.seq),
    frames.map((_frame, index) => index + 1),
    `${where}: the frames' seqs`,
  );
  assert.deepEqual(decodeValue(run.state), reference.snapshot.state, `${where}: the end state differs`);
  assert.deepEqual(cardStatuses(frames), cardStatuses(reference.frames), `${where}: the tool cards differ`);
  // A statement whose connection dropped under it may still commit after the runner heard the failure
  // (the server finishes it before it sees the socket closed): the journal as it stands is the last word.
  oracle.landed(await direct.readJournal(threadId));
  const keys = new Set(oracle.effects.map((effect) => effect.key));
  for (const key of keys) assert.ok(oracle.done.has(key), `${where}: ${key} never finished`);
  const takeovers = frames.filter((frame) => frame.type === "run_recovered").length;
  assert.ok(
    oracle.overtaken <= takeovers,
    `${where}: ${oracle.overtaken} steps ran after a takeover began them again, with ${takeovers} takeovers`,
  );
  totals.effects += oracle.effects.length;
  totals.reruns += oracle.effects.length - keys.size;
  totals.overtaken += oracle.overtaken;
  totals.takeovers += takeovers;
}
