/**
 * The postgres-faults property's editors and fault driver. Editors push random scripts as plans
 * through one document server whose PostgreSQL sits behind a TCP relay, and do on each answer what the
 * client docs say: `committed` and `conflicted` end the plan; a retryable error (`server_error`, which
 * must be a 503 `unavailable` with `Retry-After`, ADR 0492, waited out half the time; `network_error`,
 * `too_many_requests`) either sends the same bytes again or asks the plan's state
 * and, `unknown`, runs the script again on a fresh pull under the plan's id (ADR 0568), `applied`
 * ends it as committed. Meanwhile the driver loses the answers to random statements (a `COMMIT`, an
 * insert into the log, an advisory lock, a read), cuts every connection, and takes the relay down for
 * short windows, at random moments drawn from the round's seed.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { type TcpRelay, underLoadMs } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import { createDocumentClient, type DocumentClient, DocumentClientError } from "../src/index.ts";
import { randomScript, type Step } from "./concurrent-editors-model.ts";
import { type Attempt, runPlan } from "./concurrent-editors-support.ts";
import { random } from "./lost-update-plans.ts";

/** One plan an editor made: the script's runs under its id and every answer it got, in order. */
export interface FaultPlan {
  readonly planId: string;
  readonly steps: readonly Step[];
  /** The script's runs: the first, and one per `unknown` plan state after a failed push. */
  readonly tries: Attempt[];
  /** Every answer its pushes and plan-state questions got: results, error codes, states. */
  readonly answers: string[];
  /**
   * `committed`: a push answered committed (or duplicate), or the plan state `applied`; `conflicted`:
   * a push answered so; `thrown` / `unchanged`: its last run pushed nothing; `unresolved`: the editor
   * gave up after `maxSends` failed pushes (the oracle asks the healed server).
   */
  outcome?: "committed" | "conflicted" | "thrown" | "unchanged" | "unresolved";
  duplicate?: boolean;
}

export interface FaultTally {
  plans: number;
  committed: number;
  duplicates: number;
  conflicted: number;
  thrown: number;
  unchanged: number;
  unresolved: number;
  retryableErrors: number;
  /** `server_error`s answered 503 `unavailable` (any other is a fault). */
  unavailable: number;
  sentAgain: number;
  askedState: number;
  reruns: number;
  lostAnswers: number;
  cuts: number;
  downs: number;
  resets: number;
}

export const newFaultTally = (): FaultTally => ({
  plans: 0,
  committed: 0,
  duplicates: 0,
  conflicted: 0,
  thrown: 0,
  unchanged: 0,
  unresolved: 0,
  retryableErrors: 0,
  unavailable: 0,
  sentAgain: 0,
  askedState: 0,
  reruns: 0,
  lostAnswers: 0,
  cuts: 0,
  downs: 0,
  resets: 0,
});

export interface FaultRound {
  /** The servers behind the relay; an editor keeps to one (the client docs: one origin a document). */
  readonly origins: readonly string[];
  readonly documentId: string;
  readonly token: string;
  readonly seed: number;
  readonly plans: FaultPlan[];
  readonly faults: string[];
  readonly tally: FaultTally;
}

/** Pushes of one plan that fail before the editor stops and leaves it to the oracle. */
const maxSends = 6;
/** The documented retryable codes (`docs/document-server.md`, Client errors and retries). */
const retryable = new Set(["server_error", "network_error", "too_many_requests"]);
/** A request's own timeout: a `network_error` that took this long is an answer the server never sent. */
export const requestTimeoutMs = () => underLoadMs(15_000);

/**
 * What a call ended with: its value, or the code of a documented retryable error and how long to wait
 * before sending it again (a 503's `Retry-After`).
 */
type Answer<Value> = { readonly value: Value } | { readonly retry: string; readonly waitMs: number };

/**
 * A `server_error` must be the store failing for the moment (ADR 0492): 503, `data.serverCode`
 * `unavailable`, `Retry-After` given. Anything else (a 500) is a defect of the server: its reason.
 */
function notUnavailable(error: DocumentClientError): string | undefined {
  const data = error.data as { serverCode?: unknown; retryAfterSeconds?: unknown } | undefined;
  if (
    error.status === 503 &&
    data?.serverCode === "unavailable" &&
    typeof data.retryAfterSeconds === "number"
  )
    return undefined;
  return `a server_error that is not 503 unavailable with Retry-After: ${error.status} ${JSON.stringify(data)} ${error.message}`;
}

/**
 * Makes `call`: a documented retryable error is returned as such; any other error, and a call not
 * answered by its deadline, is a fault (and thrown).
 */
async function attempt<Value>(
  round: FaultRound,
  what: string,
  call: () => Promise<Value>,
): Promise<Answer<Value>> {
  const started = Date.now();
  const limit = requestTimeoutMs() + underLoadMs(5_000);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${limit} ms`)), limit);
  });
  try {
    return { value: await Promise.race([call(), late]) };
  } catch (error) {
    if (DocumentClientError.isInstance(error) && retryable.has(error.code)) {
      round.tally.retryableErrors++;
      if (error.code === "network_error" && Date.now() - started >= requestTimeoutMs())
        round.faults.push(`${what}: no answer within the client's ${requestTimeoutMs()} ms`);
      if (error.code !== "server_error") return { retry: error.code, waitMs: 0 };
      const wrong = notUnavailable(error);
      if (wrong !== undefined) round.faults.push(`${what}: ${wrong}`);
      round.tally.unavailable++;
      // The server's `Retry-After`: the docs say to send it again, waiting that out or (sooner) risking
      // another 503, never a wrong answer.
      const { retryAfterSeconds } = error.data as { retryAfterSeconds?: number };
      return { retry: error.code, waitMs: (retryAfterSeconds ?? 0) * 1_000 };
    }
    round.faults.push(`${what}: ${(error as Error).stack ?? String(error)}`);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * How long to wait before sending again after `answer`: a 503's `Retry-After` half the time, else at
 * once (the docs allow either), so retries meet the faults too.
 */
const waitBefore = (answer: { readonly waitMs: number }, next: (below: number) => number): number =>
  next(2) === 0 ? answer.waitMs : 0;

/** Makes `call` until it answers, resending after a retryable error; a fault past `limitMs`. */
export async function untilAnswered<Value>(
  round: FaultRound,
  what: string,
  next: (below: number) => number,
  call: () => Promise<Value>,
): Promise<Value> {
  const limitMs = underLoadMs(45_000);
  const started = Date.now();
  for (;;) {
    const answer = await attempt(round, what, call);
    if ("value" in answer) return answer.value;
    if (Date.now() - started > limitMs) {
      round.faults.push(`${what}: still ${answer.retry} after ${limitMs} ms`);
      throw new Error(`${what}: not served`);
    }
    await sleep(waitBefore(answer, next) + 20 + next(80));
  }
}

/** One editor: `scripts` plans in turn, each on what it last pulled. */
export async function runFaultEditor(round: FaultRound, editor: number, scripts: number): Promise<void> {
  const next = random(round.seed * 1_009 + editor);
  let made = 0;
  const unique = () => `${round.seed}-${editor}-${made++}`;
  const client = createDocumentClient({
    origin: round.origins[editor % round.origins.length] as string,
    token: round.token,
    userId: `editor-${editor}`,
    timeoutMs: requestTimeoutMs(),
  });
  const doc = new LoroDoc();
  const peer = () => BigInt(1 + next(2 ** 30)) * 1024n + BigInt(editor);
  for (let index = 0; index < scripts; index++) {
    const plan: FaultPlan = {
      planId: `plan-${unique()}`,
      steps: randomScript(next, unique),
      tries: [],
      answers: [],
    };
    round.plans.push(plan);
    round.tally.plans++;
    await pushThroughFaults(round, client, doc, plan, next, peer);
  }
}

/** Runs the plan's script on a fresh pull into `doc` under the plan's id: its update, or why none. */
async function runTry(
  round: FaultRound,
  client: DocumentClient,
  doc: LoroDoc,
  plan: FaultPlan,
  next: (below: number) => number,
  peer: bigint,
): Promise<Uint8Array | "thrown" | "unchanged"> {
  await untilAnswered(round, `${plan.planId} pull`, next, () => client.pullInto(round.documentId, doc));
  const run: Attempt = { planId: plan.planId, steps: plan.steps, trace: [], via: 0 };
  plan.tries.push(run);
  return runPlan(doc, run, peer);
}

/**
 * Pushes a plan until an answer ends it, as the client docs say: a retryable error sends the same
 * bytes again, or asks the plan's state and reruns the script under its id when `unknown`.
 */
export async function pushThroughFaults(
  round: FaultRound,
  client: DocumentClient,
  doc: LoroDoc,
  plan: FaultPlan,
  next: (below: number) => number,
  peer: () => bigint,
): Promise<void> {
  const what = `${plan.planId} push`;
  let bytes = await runTry(round, client, doc, plan, next, peer());
  for (let send = 1; ; send++) {
    if (typeof bytes === "string") {
      plan.outcome = bytes;
      return;
    }
    // Others push meanwhile: the plan's base grows old.
    await sleep(next(20));
    const update = bytes;
    const answer = await attempt(round, what, () => client.push(round.documentId, update));
    if ("value" in answer) {
      const result = answer.value;
      plan.answers.push(
        result.status + (result.status === "committed" && result.duplicate ? " duplicate" : ""),
      );
      if (result.status === "committed") {
        // Only a plan one of whose pushes failed may have been stored before.
        if (result.duplicate === true && send === 1)
          round.faults.push(`${what}: a first push answered duplicate`);
        plan.duplicate = result.duplicate === true;
        plan.outcome = "committed";
      } else if (result.status === "conflicted" && !result.applied && result.reasons.length > 0)
        plan.outcome = "conflicted";
      else round.faults.push(`${what}: ${JSON.stringify(result)}`);
      return;
    }
    plan.answers.push(answer.retry);
    if (send >= maxSends) {
      plan.outcome = "unresolved";
      return;
    }
    await sleep(waitBefore(answer, next) + next(60));
    if (next(2) === 0) {
      round.tally.sentAgain++;
      continue;
    }
    // Asked whether it landed: `applied` is committed, `unknown` runs the script again under its id.
    round.tally.askedState++;
    const state = await untilAnswered(round, `${plan.planId} state`, next, () =>
      client.planState(round.documentId, plan.planId),
    );
    plan.answers.push(`state ${state.state}`);
    if (state.state === "applied") {
      plan.outcome = "committed";
      return;
    }
    round.tally.reruns++;
    bytes = await runTry(round, client, doc, plan, next, peer());
  }
}

/** The relay's faults, armed only while `live`: a fault left armed when the round heals never fires. */
export interface FaultSwitch {
  live: boolean;
}

/** Statements the server sends to PostgreSQL whose answers the driver loses (latin1 of the chunk). */
const statements: readonly RegExp[] = [
  /COMMIT/,
  /COMMIT/,
  /INSERT INTO docscript_updates/,
  /INSERT INTO docscript_plans/,
  /UPDATE docscript_projection/,
  /pg_advisory_lock\(/,
  /pg_advisory_unlock/,
  /FROM docscript_updates/,
  /FROM docscript_plans/,
  /FROM docscript_documents/,
  /FROM docscript_rows/,
  /BEGIN/,
];

/**
 * Breaks the relay at random moments until `done` or `budget` faults: loses the answer to a random
 * statement (a `COMMIT` most often) or to the next request of any connection, cuts every connection,
 * or takes the relay down for up to 400 ms.
 */
export async function driveFaults(
  round: FaultRound,
  relay: TcpRelay,
  armed: FaultSwitch,
  budget: number,
  done: () => boolean,
): Promise<void> {
  const next = random(round.seed * 7_919 + 1);
  for (let fault = 0; fault < budget && !done(); fault++) {
    await sleep(10 + next(120));
    const roll = next(10);
    if (roll < 6) {
      const statement = statements[next(statements.length)] as RegExp;
      relay.loseAnswerTo((text) => armed.live && statement.test(text));
      round.tally.lostAnswers++;
    } else if (roll < 7) {
      // The next request any connection sends.
      relay.loseAnswerTo(() => armed.live);
      round.tally.lostAnswers++;
    } else if (roll < 9) {
      relay.cut();
      round.tally.cuts++;
    } else {
      relay.down();
      round.tally.downs++;
      await sleep(50 + next(350));
      relay.up();
    }
  }
}
