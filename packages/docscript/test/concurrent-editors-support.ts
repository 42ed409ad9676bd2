/**
 * The concurrent-editors property's clients and its check: editors each pull the document through a
 * document server (one of two over the same store, drawn per script), run a random script in a
 * session over a fork of what they pulled, and push it as a plan, all at once over real HTTP. Then the
 * change log gives the server's commit order, the committed scripts are replayed on the plain model in
 * that order, and a fresh client's read of the document must equal it.
 */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { ToolAbortedError } from "@tackle/core";
import { underLoadMs } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import {
  createDocumentClient,
  DocScriptError,
  type DocumentClient,
  interpretDocument,
  openDocument,
  type PlanState,
  type PushResult,
  timelineSchema,
} from "../src/index.ts";
import {
  type Model,
  modelOf,
  randomScript,
  replay,
  runScript,
  type Step,
  sessionApi,
  sortedModel,
  type Traced,
  tracks,
  transcripts,
} from "./concurrent-editors-model.ts";
import { random } from "./lost-update-plans.ts";

/** One script an editor ran, and how it ended. */
export interface Attempt {
  readonly planId: string;
  readonly steps: readonly Step[];
  readonly trace: Traced[];
  /** The server (its index in the round's origins) the plan was pushed through. */
  readonly via: number;
  /** The Loro peer the plan's ops were written on (decimal): which of a plan id's pushes was stored. */
  peer?: string;
  /**
   * A script run again under the id of a plan whose push was aborted and that the other server said it
   * never applied (what the tool does after `not_found`, ADR 0568): answered `duplicate` when the first
   * push landed before it.
   */
  readonly redo?: boolean;
  /** A redo's aborted first run: at most one of the two may be stored. */
  readonly redoOf?: Attempt;
  duplicate?: boolean;
  /**
   * `thrown`: the script threw, nothing was pushed; `unchanged`: it wrote nothing (no plan to push);
   * `aborted`: its push was aborted in flight.
   */
  outcome?: "committed" | "conflicted" | "thrown" | "unchanged" | "aborted";
  /** An aborted push sent again: what it answered. */
  again?: PushResult["status"];
}

export interface Tally {
  attempts: number;
  committed: number;
  conflicted: number;
  thrown: number;
  aborted: number;
  abortedLanded: number;
  sentAgain: number;
  unchanged: number;
  reruns: number;
  /** Aborted pushes whose plan the other server was asked of at once, and said it never applied. */
  askedElsewhere: number;
  unknownElsewhere: number;
  /** Of the plans run again under their id after that: the first push stored, the second a duplicate. */
  redoDuplicate: number;
  /** Committed scripts that read, and did not write, what a commit before them changed (ADR 0475). */
  staleReadsOfUnwritten: number;
}

export const newTally = (): Tally => ({
  attempts: 0,
  committed: 0,
  conflicted: 0,
  thrown: 0,
  aborted: 0,
  abortedLanded: 0,
  sentAgain: 0,
  unchanged: 0,
  reruns: 0,
  askedElsewhere: 0,
  unknownElsewhere: 0,
  redoDuplicate: 0,
  staleReadsOfUnwritten: 0,
});

/** The document every round starts from: three tracks, two transcripts, four phonetic scripts, two links. */
export function seedSnapshot(): Uint8Array {
  const doc = new LoroDoc();
  const session = openDocument(doc, timelineSchema);
  for (const [index, track] of tracks.entries())
    session.entities.create({
      entityKind: "track",
      entityId: track,
      payload: { role: "audio", name: `track ${index}`, volume: 0 },
    });
  for (const transcript of transcripts)
    session.entities.create({ entityKind: "audio-script", entityId: transcript, payload: { segments: [] } });
  for (let index = 0; index < 4; index++)
    session.entities.create({
      entityKind: "phonetic-script",
      entityId: `phonetic-seed-${index}`,
      payload: { text: "seed" },
    });
  for (const [index, transcript] of transcripts.entries())
    session.relations.link({
      relationKind: "phonetics-of",
      endpoint0EntityId: `phonetic-seed-${index}`,
      endpoint1EntityId: transcript,
    });
  doc.commit();
  return doc.export({ mode: "snapshot" });
}

/** What a round's editors share: where to send, what to record. */
export interface Round {
  readonly origins: readonly string[];
  readonly documentId: string;
  readonly token: string;
  readonly seed: number;
  readonly attempts: Attempt[];
  readonly faults: string[];
  readonly tally: Tally;
}

/** A request's deadline: the client's own, and the property's, past which an unanswered call is a fault. */
const requestTimeoutMs = () => underLoadMs(20_000);

/** Waits for `call`, recording a fault (and failing) when it has no answer by its deadline. */
async function answered<Value>(round: Round, what: string, call: Promise<Value>): Promise<Value> {
  const limit = requestTimeoutMs() + underLoadMs(5_000);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      round.faults.push(`${what}: no answer within ${limit} ms`);
      reject(new Error(`${what}: no answer within ${limit} ms`));
    }, limit);
  });
  try {
    return await Promise.race([call, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs `steps` on a fork of `doc` as plan `planId`: its update, `thrown` when the script threw, or
 * `unchanged` when it wrote nothing.
 */
export function runPlan(doc: LoroDoc, attempt: Attempt, peer: bigint): Uint8Array | "thrown" | "unchanged" {
  const fork = doc.fork();
  fork.setPeerId(peer);
  attempt.peer = String(peer);
  const from = fork.oplogVersion();
  const session = openDocument(fork, timelineSchema);
  try {
    runScript(sessionApi(session, attempt.trace), attempt.steps);
  } catch (error) {
    // The script's own throw, or a write the session refused: the run ends, nothing is pushed.
    if (!DocScriptError.isInstance(error) && (error as Error).message !== "the script throws half way")
      throw error;
    return "thrown";
  }
  assert.deepEqual(session.check(), [], `${attempt.planId} leaves its fork valid`);
  fork.commit({ message: JSON.stringify({ planId: attempt.planId }) });
  if (fork.oplogVersion().compare(from) === 0) return "unchanged";
  return fork.export({ mode: "update", from });
}

/** Pushes a plan's update, aborted in flight when `abortAfterMs` is given; sent again at times. */
async function pushPlan(
  round: Round,
  client: DocumentClient,
  attempt: Attempt,
  bytes: Uint8Array,
  abortAfterMs: number | undefined,
  sendAgain: boolean,
): Promise<void> {
  const controller = new AbortController();
  if (abortAfterMs !== undefined) setTimeout(() => controller.abort(), abortAfterMs);
  const what = `${attempt.planId} push`;
  try {
    const result = await answered(
      round,
      what,
      client.push(round.documentId, bytes, { signal: controller.signal }),
    );
    if (result.status === "committed") {
      if (result.duplicate === true && attempt.redo !== true)
        round.faults.push(`${what}: a first push answered duplicate`);
      if (result.duplicate === true) attempt.duplicate = true;
      attempt.outcome = "committed";
    } else if (result.status === "conflicted" && !result.applied && result.reasons.length > 0)
      attempt.outcome = "conflicted";
    else round.faults.push(`${what}: ${JSON.stringify(result)}`);
  } catch (error) {
    if (!ToolAbortedError.isInstance(error) || abortAfterMs === undefined) throw error;
    attempt.outcome = "aborted";
    if (!sendAgain) return;
    // Sent again after an abort, as a client that got no answer does: stored at most once.
    const again = await answered(round, `${what} again`, client.push(round.documentId, bytes));
    attempt.again = again.status;
    if (again.status === "rejected") round.faults.push(`${what} again: ${JSON.stringify(again)}`);
  }
}

/** One editor: `scripts` scripts in turn, each on what it last pulled, through a server drawn each time. */
export async function runEditor(round: Round, editor: number, scripts: number): Promise<void> {
  const next = random(round.seed * 1_009 + editor);
  let made = 0;
  const unique = () => `${round.seed}-${editor}-${made++}`;
  const clients = round.origins.map((origin) =>
    createDocumentClient({
      origin,
      token: round.token,
      userId: `editor-${editor}`,
      timeoutMs: requestTimeoutMs(),
    }),
  );
  const doc = new LoroDoc();
  for (let index = 0; index < scripts; index++) {
    let steps = randomScript(next, unique);
    // A conflicted script is run again on a fresh pull (what the tool tells the model), at most once.
    for (let run = 0; run < 2; run++) {
      const via = next(clients.length);
      const client = clients[via] as DocumentClient;
      await answered(round, `editor ${editor} pull`, client.pullInto(round.documentId, doc));
      const attempt: Attempt = { planId: `plan-${unique()}`, steps, trace: [], via };
      round.attempts.push(attempt);
      round.tally.attempts++;
      const bytes = runPlan(doc, attempt, BigInt(1 + next(2 ** 30)) * 1024n + BigInt(editor));
      if (typeof bytes === "string") {
        attempt.outcome = bytes;
        break;
      }
      // Others push meanwhile: the plan's base grows old.
      await sleep(next(20));
      const abortAfterMs = next(6) === 0 ? next(12) : undefined;
      await pushPlan(round, client, attempt, bytes, abortAfterMs, next(2) === 0);
      if (attempt.outcome === "aborted" && attempt.again === undefined)
        await redoElsewhere(round, clients, doc, attempt, BigInt(1 + next(2 ** 30)) * 1024n + BigInt(editor));
      if (attempt.outcome !== "conflicted" || next(2) === 0) break;
      round.tally.reruns++;
      steps = [...steps];
    }
  }
}

/**
 * An aborted push's plan asked of the other server at once (a tool restarted against it). Said never
 * applied, the script runs again there on a fresh pull under the plan's id, as the tool's `not_found`
 * answer tells the model (ADR 0568): the first push may still land, and only one of the two may be stored.
 */
async function redoElsewhere(
  round: Round,
  clients: readonly DocumentClient[],
  doc: LoroDoc,
  aborted: Attempt,
  peer: bigint,
): Promise<void> {
  const via = (aborted.via + 1) % clients.length;
  const client = clients[via] as DocumentClient;
  round.tally.askedElsewhere++;
  const what = `${aborted.planId} asked elsewhere`;
  const state = await answered(round, what, client.planState(round.documentId, aborted.planId));
  if (state.state !== "unknown") return;
  round.tally.unknownElsewhere++;
  await answered(round, `${what}: pull`, client.pullInto(round.documentId, doc));
  const attempt: Attempt = {
    planId: aborted.planId,
    steps: aborted.steps,
    trace: [],
    via,
    redo: true,
    redoOf: aborted,
  };
  round.attempts.push(attempt);
  round.tally.attempts++;
  const bytes = runPlan(doc, attempt, peer);
  if (typeof bytes === "string") attempt.outcome = bytes;
  else await pushPlan(round, client, attempt, bytes, undefined, false);
  if (attempt.duplicate === true) round.tally.redoDuplicate++;
}

/** Every change of the log, oldest first: the plan ids each stored push carried, and its peers. */
export async function commitOrder(
  client: DocumentClient,
  documentId: string,
): Promise<Map<string, { seq: number; peers: readonly string[] }>> {
  const seqs = new Map<string, { seq: number; peers: readonly string[] }>();
  let cursor: string | undefined;
  const duplicates: string[] = [];
  do {
    const page = await client.changes(documentId, {
      limit: 200,
      ...(cursor === undefined ? {} : { cursor }),
    });
    for (const change of page.changes)
      for (const planId of change.planIds) {
        if (seqs.has(planId)) duplicates.push(planId);
        seqs.set(planId, { seq: change.seq, peers: change.peers });
      }
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  assert.deepEqual(duplicates, [], "every plan stored at most once");
  return seqs;
}

/**
 * The oracle: every answer agrees with the log (committed: stored once; conflicted or thrown: not
 * stored; aborted: the server's plan state says which), the committed scripts replayed in the log's
 * order never read stale what they write, and the document a fresh client reads through each server
 * is the model they leave.
 */
export async function checkRound(round: Round, seedModel: Model): Promise<void> {
  const { faults, tally } = round;
  const readers = round.origins.map((origin) => createDocumentClient({ origin, token: round.token }));
  const reader = readers[0] as DocumentClient;
  // An aborted push may still be on its way into the log: its server answers its plan's state after
  // every push queued there before the question (what a client that got no answer asks).
  // Every server is asked, the one it was pushed through first: once that one answers, each must agree.
  const states = new Map<string, PlanState[]>();
  for (const attempt of round.attempts)
    if (attempt.outcome === "aborted") {
      const asked: PlanState[] = [];
      for (let offset = 0; offset < readers.length; offset++)
        asked.push(
          await (readers[(attempt.via + offset) % readers.length] as DocumentClient).planState(
            round.documentId,
            attempt.planId,
          ),
        );
      states.set(attempt.planId, asked);
    }
  const seqs = await commitOrder(reader, round.documentId);
  const accepted: { attempt: Attempt; seq: number }[] = [];
  // The plan's stored push is an attempt's when it carries the attempt's peer (a redo shares the id).
  const seqOf = (attempt: Attempt) => {
    const stored = seqs.get(attempt.planId);
    return stored?.peers.includes(attempt.peer ?? "") === true ? stored.seq : undefined;
  };
  for (const attempt of round.attempts) {
    const stored = seqs.get(attempt.planId);
    const seq = seqOf(attempt);
    if (attempt.redoOf !== undefined && seq !== undefined && seqOf(attempt.redoOf) !== undefined)
      faults.push(`${attempt.planId}: its script applied twice, at ${seqOf(attempt.redoOf)} and ${seq}`);
    const where = `${attempt.planId} ${JSON.stringify(attempt.steps)} (${attempt.outcome}, again ${attempt.again})`;
    if (attempt.outcome === undefined) faults.push(`${where}: no answer`);
    else tally[attempt.outcome]++;
    if (attempt.outcome === "committed" && attempt.duplicate !== true && seq === undefined)
      faults.push(`${where}: answered committed, not stored`);
    if (attempt.duplicate === true && (seq !== undefined || stored === undefined))
      faults.push(`${where}: answered duplicate, but the log has ${JSON.stringify(stored)}`);
    if (attempt.outcome !== "committed" && attempt.outcome !== "aborted" && seq !== undefined)
      faults.push(`${where}: stored at ${seq}`);
    if (attempt.outcome === "aborted") {
      for (const state of states.get(attempt.planId) ?? [])
        if ((state.state === "applied") !== (stored !== undefined))
          faults.push(`${where}: plan state ${state.state}, in the log: ${JSON.stringify(stored)}`);
      if (attempt.again !== undefined) tally.sentAgain++;
      if (attempt.again === "conflicted" && seq !== undefined)
        faults.push(`${where}: sent again conflicted, but stored`);
      if (attempt.again === "committed" && seq === undefined)
        faults.push(`${where}: sent again committed, not stored`);
      if (seq !== undefined) tally.abortedLanded++;
    }
    if (seq !== undefined) accepted.push({ attempt, seq });
  }
  accepted.sort((left, right) => left.seq - right.seq);
  const model: Model = structuredClone(seedModel);
  for (const { attempt, seq } of accepted) {
    const replayed = replay(model, attempt.steps, attempt.trace);
    for (const fault of replayed.faults)
      faults.push(`${attempt.planId} (seq ${seq}) ${JSON.stringify(attempt.steps)}: ${fault}`);
    if (replayed.skewed) tally.staleReadsOfUnwritten++;
  }
  if (faults.length > 0)
    faults.push(
      `the commit order: ${accepted.map(({ attempt, seq }) => `\n  ${seq} ${attempt.planId} ${JSON.stringify(attempt.steps)} ${JSON.stringify(attempt.trace)}`).join("")}`,
    );
  for (const origin of round.origins) {
    const doc = new LoroDoc();
    await createDocumentClient({ origin, token: round.token }).pullInto(round.documentId, doc);
    const read = modelOf(interpretDocument(doc, timelineSchema));
    assert.deepEqual(read.issues, [], `seed ${round.seed}: the document is valid`);
    const { issues: _, ...found } = read;
    if (JSON.stringify(found) !== JSON.stringify(sortedModel(model)))
      faults.push(
        `through ${origin}: the document is ${JSON.stringify(found)}\n  where the commit order gives ${JSON.stringify(sortedModel(model))}`,
      );
  }
  if (faults.length > 0) {
    const all = [];
    let cursor: string | undefined;
    do {
      const page = await reader.changes(round.documentId, {
        limit: 200,
        ...(cursor === undefined ? {} : { cursor }),
      });
      all.push(...page.changes);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    faults.push(`log: ${JSON.stringify(all.map((c) => [c.seq, c.status, c.planIds, c.peers, c.actor]))}`);
    faults.push(
      `aborted: ${JSON.stringify(round.attempts.filter((a) => a.outcome === "aborted").map((a) => [a.planId, a.again]))}`,
    );
  }
}
