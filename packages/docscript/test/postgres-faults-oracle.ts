/**
 * The postgres-faults property's oracle: once the relay healed, each server answers again within a
 * bound, then probe plans commit at their first push (the pool not wedged, no advisory lock left
 * held) and wake a waiting pull through the other server; each plan is in the change log at most
 * once, as one of its own runs, and exactly once when any answer said it committed (or its state
 * `applied`); never when it ended conflicted or pushed nothing; every plan's state through the healed
 * server agrees with the log (an unresolved plan is known only so); and the document read through
 * every server given equals the stored plans replayed serially in the log's order on the plain model.
 */
import { underLoadMs } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import {
  createDocumentClient,
  type DocumentClient,
  interpretDocument,
  timelineSchema,
} from "../src/index.ts";
import { type Model, modelOf, replay, sortedModel, tracks } from "./concurrent-editors-model.ts";
import { type Attempt, commitOrder } from "./concurrent-editors-support.ts";
import { random } from "./lost-update-plans.ts";
import {
  type FaultPlan,
  type FaultRound,
  pushThroughFaults,
  requestTimeoutMs,
  untilAnswered,
} from "./postgres-faults-support.ts";

/**
 * Once healed, each server answers a pull within `underLoadMs(10 s)`: the first may still meet a
 * pooled connection the last fault closed under it (503 `unavailable`, never a 500: ADR 0492), and is
 * sent again. After that nothing may fail: the probes below count every answer.
 */
export async function servesAgain(round: FaultRound, origin: string): Promise<void> {
  const started = Date.now();
  const boundMs = underLoadMs(10_000);
  const client = createDocumentClient({ origin, token: round.token, timeoutMs: requestTimeoutMs() });
  const next = random(round.seed * 37);
  await untilAnswered(round, `pull through ${origin} once healed`, next, () =>
    client.pullInto(round.documentId, new LoroDoc()),
  );
  const tookMs = Date.now() - started;
  if (tookMs > boundMs)
    round.faults.push(`${origin} served again ${tookMs} ms after the heal (bound ${boundMs} ms)`);
}

/**
 * A plan that renames a track, pushed through `origin` once nothing fails any more: a fault unless its
 * first push commits within `underLoadMs(10 s)` of the call.
 */
export async function probeServes(round: FaultRound, origin: string, name: string): Promise<void> {
  const started = Date.now();
  const boundMs = underLoadMs(10_000);
  const client = createDocumentClient({ origin, token: round.token, timeoutMs: requestTimeoutMs() });
  const plan: FaultPlan = {
    planId: `probe-${name}-${round.seed}`,
    steps: [{ kind: "rename", track: tracks[round.seed % tracks.length] as string, name: `probe ${name}` }],
    tries: [],
    answers: [],
  };
  round.plans.push(plan);
  const next = random(round.seed * 31 + name.length);
  await pushThroughFaults(
    round,
    client,
    new LoroDoc(),
    plan,
    next,
    () => BigInt(1 + next(2 ** 30)) * 1024n + 999n,
  );
  const tookMs = Date.now() - started;
  if (plan.outcome !== "committed" || plan.answers.join() !== "committed" || tookMs > boundMs)
    round.faults.push(
      `${name}: the healed server's first push answered ${JSON.stringify(plan.answers)} in ${tookMs} ms (bound ${boundMs} ms)`,
    );
}

/**
 * A waiting pull through `waiterOrigin` while a probe plan is pushed through `pusherOrigin`: the pull
 * must answer the probe's update, not time out: the waiting server listens to PostgreSQL's append
 * announcements again after the faults.
 */
export async function probeWakes(
  round: FaultRound,
  waiterOrigin: string,
  pusherOrigin: string,
  name: string,
) {
  const waiter = createDocumentClient({
    origin: waiterOrigin,
    token: round.token,
    timeoutMs: requestTimeoutMs(),
  });
  const { version } = await waiter.pullInto(round.documentId, new LoroDoc());
  const waitMs = Math.min(25_000, requestTimeoutMs() - 1_000);
  const pulled = waiter.pull(round.documentId, { since: version, waitMs });
  await probeServes(round, pusherOrigin, name);
  const committedAt = Date.now();
  const answer = await pulled;
  // Past its wait, a pull answers what it finds then: the push too, late.
  const lateMs = Date.now() - committedAt;
  if (answer.version === version || lateMs > Math.min(underLoadMs(5_000), waitMs / 2))
    round.faults.push(
      `${name}: a waiting pull through ${waiterOrigin} answered a push through ${pusherOrigin} ${lateMs} ms after it committed (waiting ${waitMs} ms)`,
    );
}

/** Checks the round's plans against the log and the document against their serial replay. */
export async function checkFaultRound(
  round: FaultRound,
  seedModel: Model,
  origins: readonly string[],
): Promise<void> {
  const { faults, tally } = round;
  const reader = createDocumentClient({ origin: round.origins[0] as string, token: round.token });
  // Every plan's state through the healed server: what a client that lost its answer goes by, so it
  // must agree with the log (an unresolved plan is known only so).
  const states = new Map<string, string>();
  for (const plan of round.plans)
    states.set(plan.planId, (await reader.planState(round.documentId, plan.planId)).state);
  const seqs = await commitOrder(reader, round.documentId);
  const accepted: { plan: FaultPlan; run: Attempt; seq: number }[] = [];
  for (const plan of round.plans) {
    const stored = seqs.get(plan.planId);
    const run =
      stored === undefined ? undefined : plan.tries.find((each) => stored.peers.includes(each.peer ?? ""));
    const where = `${plan.planId} ${JSON.stringify(plan.steps)} (${plan.outcome}: ${plan.answers.join(", ")})`;
    if (plan.outcome === undefined) faults.push(`${where}: never ended`);
    else tally[plan.outcome]++;
    if (plan.duplicate === true) tally.duplicates++;
    if (stored !== undefined && run === undefined)
      faults.push(`${where}: the log holds a push none of its runs made: ${JSON.stringify(stored)}`);
    if (plan.outcome === "committed" && stored === undefined)
      faults.push(`${where}: answered committed, not stored`);
    if (plan.outcome !== "committed" && plan.outcome !== "unresolved" && stored !== undefined)
      faults.push(`${where}: stored at ${stored.seq}`);
    const state = states.get(plan.planId);
    if (state !== undefined && (state === "applied") !== (stored !== undefined))
      faults.push(`${where}: plan state ${state}, in the log: ${JSON.stringify(stored)}`);
    if (stored !== undefined && run !== undefined) accepted.push({ plan, run, seq: stored.seq });
  }
  accepted.sort((left, right) => left.seq - right.seq);
  const model: Model = structuredClone(seedModel);
  for (const { plan, run, seq } of accepted) {
    const replayed = replay(model, plan.steps, run.trace);
    for (const fault of replayed.faults)
      faults.push(`${plan.planId} (seq ${seq}) ${JSON.stringify(plan.steps)}: ${fault}`);
  }
  for (const origin of origins) {
    const found = await documentThrough(
      createDocumentClient({ origin, token: round.token }),
      round.documentId,
    );
    if (found.issues.length > 0) faults.push(`through ${origin}: issues ${JSON.stringify(found.issues)}`);
    const { issues: _, ...read } = found;
    if (JSON.stringify(read) !== JSON.stringify(sortedModel(model)))
      faults.push(
        `through ${origin}: the document is ${JSON.stringify(read)}\n  where the log's order gives ${JSON.stringify(sortedModel(model))}`,
      );
  }
  if (faults.length > 0)
    faults.push(
      `the log's order: ${accepted.map(({ plan, run, seq }) => `\n  ${seq} ${plan.planId} ${JSON.stringify(plan.steps)} ${JSON.stringify(run.trace)}`).join("")}`,
    );
}

/** The document a fresh client pulls, in the model's shape. */
async function documentThrough(client: DocumentClient, documentId: string) {
  const doc = new LoroDoc();
  await client.pullInto(documentId, doc);
  return modelOf(interpretDocument(doc, timelineSchema));
}
