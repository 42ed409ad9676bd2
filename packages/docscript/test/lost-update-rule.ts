/**
 * The lost-update rule as a property (ADR 0475), run once per store: pairs and triples of random plans
 * made from one base version are pushed to the server's push pipeline in a random order, on random peer
 * ids. Every plan is answered `committed` or `conflicted`; after each round the document is valid, every
 * committed plan's net effect (the entities it created, changed or deleted, as it left them, and the
 * relations it added or removed) is in it, and it equals the base with the committed plans' net effects
 * laid on in the order they committed (the sequential oracle). A plan's steps are not replayed: a plan
 * that moves a clip into a track and on again within itself changes only where the clip ends up, which
 * is what a replay over the other plans' writes misjudged (seeds 1127, 1188 and 1228, kept in every run).
 * A conflicted plan is sometimes retried with `applyRemaining`: stored, it keeps every committed change
 * and the document valid.
 *
 * Full runs (`TACKLE_PROPERTY_ROUNDS=5000`: seeds 1000–1249, 5,000 rounds a store), code of 64301eb:
 * - PostgreSQL, 2 December 2026, 07:01–08:16 UTC, load 30–34, split over processes by
 *   `TACKLE_PROPERTY_SEEDS`: all 250 seeds passed (11,823 plans in 4,720 counted rounds: 10,695
 *   committed, 1,128 conflicted; `applyRemaining` 150 stored, 131 refused).
 * - SQLite, 2 December 2026: all 250 seeds passed, on main at ae8d289 (10:18–10:23 UTC, load 8–21) and
 *   at 6d27976 (11:30–11:56 UTC, load 21–33): 12,511 plans in 4,843 counted rounds: 11,332 committed,
 *   1,179 conflicted; `applyRemaining` 158 stored, 139 refused.
 *
 * Since ADR 0508 every push may come after staged parts (its own update's, in parts of one to four
 * atoms; a prefix of any plan of the round's; or both), drawn apart from the plans, so each seed plays
 * the plans it played before. Full run on SQLite, main at ed0e0f7, 3 December 2026 13:29–13:33 UTC,
 * load 4–5: all 250 seeds passed, the same 12,511 plans in 4,843 counted rounds (11,332 committed,
 * 1,179 conflicted; `applyRemaining` 158 stored, 139 refused); 69,109 parts sent, 49,359 staged. The
 * same on PostgreSQL, main at ed0e0f7, 13:34–13:44 UTC, load 3–5: all 250 seeds passed, the same counts.
 * With bare claims lookups (ADR 0509): SQLite at c5f07ad, 3 December 16:27–16:30 UTC, and PostgreSQL
 * with the handle frees of 98ebb50, 16:30–16:35 UTC: all 250 seeds passed on both, the same counts.
 * With relation ids held per endpoint as one id or a few (9a506da) and window pages taken before their
 * rows are joined (0a80244): SQLite 3 December 19:40–19:44 UTC, PostgreSQL 19:44–19:50 UTC, load 2–4:
 * all 250 seeds passed on both, the same counts.
 * With parts of placed field writes staged detached (ADR 0517; main at 614726c, 5 December 18:29–18:40
 * UTC, load 4–5): all 250 seeds passed on SQLite and on PostgreSQL, the same counts; 360 pushes judged
 * in a detached replica on each.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Logger } from "@tackle/core";
import { decodeImportBlobMeta, LoroDoc } from "loro-crdt";
import { projectDocument } from "../src/document/interpret.ts";
import { encodeVersion } from "../src/document/version.ts";
import { timelineSchema } from "../src/index.ts";
import { DocumentHost, type DocumentHostOptions, type DocumentStore } from "../src/server/index.ts";
import type { PushResult } from "../src/server/push-result.ts";
import {
  type Effect,
  makePlan,
  type Plan,
  random,
  type Shape,
  seedSnapshot,
  shape,
} from "./lost-update-plans.ts";

export { apply, seedSnapshot } from "./lost-update-plans.ts";

/**
 * The sequential oracle by net effect: `base` with each committed plan's effect laid on in the order they
 * committed. A plan's steps are not replayed: a plan that moves a clip into a track and on again, or
 * places one on a track it deletes itself, changes only where the clip ends up.
 */
function expectedShape(base: Shape, committed: readonly Plan[]) {
  const entities = new Map(base.entities);
  const relations = new Map(base.relations);
  for (const { effect } of committed) {
    for (const [entityId, entity] of effect.entities)
      if (entity === undefined) entities.delete(entityId);
      else entities.set(entityId, entity);
    // Two plans that delete one entity lose nothing: the second finds its relations gone already.
    for (const key of effect.removed) {
      const count = relations.get(key) ?? 0;
      if (count > 1) relations.set(key, count - 1);
      else relations.delete(key);
    }
    for (const key of effect.added) relations.set(key, (relations.get(key) ?? 0) + 1);
  }
  return { entities, relations };
}

/** Where `final` lacks a part of `effect` (but for the entities and relations in `overridden`). */
function missing(final: Shape, effect: Effect, overridden: Effect | undefined): string[] {
  const found: string[] = [];
  for (const [entityId, left] of effect.entities) {
    if (overridden?.entities.has(entityId)) continue;
    const now = final.entities.get(entityId);
    if (JSON.stringify(now) !== JSON.stringify(left))
      found.push(
        `${entityId}: ${JSON.stringify(now) ?? "deleted"} where it left ${JSON.stringify(left) ?? "deleted"}`,
      );
  }
  for (const key of effect.added)
    if (!final.relations.has(key) && !overridden?.removed.includes(key)) found.push(`${key} is missing`);
  for (const key of effect.removed)
    if (final.relations.has(key) && !overridden?.added.includes(key)) found.push(`${key} is back`);
  return found;
}

const sorted = <Value>(map: ReadonlyMap<string, Value>) =>
  [...map].sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0));

export interface RoundCounts {
  rounds: number;
  plans: number;
  committed: number;
  conflicted: number;
  remainingApplied: number;
  remainingRefused: number;
  /** Parts of plans staged ahead of pushes (ADR 0508), and how many of them the server took. */
  partsSent: number;
  partsStaged: number;
  /** Pushes judged in a detached replica from the rows their parts patched (ADR 0517). */
  judgedDetached: number;
}

/**
 * Stages parts of `plan`'s update (made on `base`) ahead of a push (ADR 0508): all of it, or a random
 * prefix, in random parts of one to four atoms. Drawn with `next`, apart from the plans' own draws.
 */
async function stageParts(
  host: DocumentHost,
  documentId: string,
  base: LoroDoc,
  plan: Plan,
  next: (below: number) => number,
  whole: boolean,
  counts: RoundCounts,
): Promise<void> {
  const meta = decodeImportBlobMeta(plan.bytes, false);
  const scratch = base.fork();
  scratch.import(plan.bytes);
  for (const [peer, end] of meta.partialEndVersionVector.toJSON()) {
    const start = meta.partialStartVersionVector.get(peer) ?? 0;
    const stop = whole ? end : start + next(end - start + 1);
    for (let counter = start; counter < stop; ) {
      const len = Math.min(stop - counter, 1 + next(4));
      const part = scratch.export({ mode: "updates-in-range", spans: [{ id: { peer, counter }, len }] });
      counts.partsSent++;
      if ((await host.stage(documentId, part, 16 * 2 ** 20)).staged) counts.partsStaged++;
      counter += len;
    }
  }
}

/**
 * Plays `rounds` rounds on one document of `host` (created from `seedSnapshot` beforehand), checking
 * each against the sequential oracle; adds to `counts`.
 */
export async function playRounds(
  host: DocumentHost,
  documentId: string,
  seed: number,
  rounds: number,
  counts: RoundCounts,
): Promise<void> {
  const next = random(seed);
  // Parts staged before pushes: drawn apart, so each seed's plans are the ones it always played.
  const stageNext = random(seed * 7_919 + 13);
  // Listings read as a tool's run reads them before some pushes: the server's projection of the open
  // document takes their rows (ADR 0515), and the pushes after are judged with them.
  const readNext = random(seed * 104_729 + 7);
  let made = 0;
  const unique = () => `${seed}-${made++}`;
  const replica = new LoroDoc();
  replica.import((await host.snapshot(documentId)).bytes);
  // What the replica holds, read at the end of each round for the next (reading it costs).
  let known: Shape | undefined;
  for (let round = 0; round < rounds; round++) {
    const log: string[] = [];
    try {
      await playRound(round);
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${log.join("\n")}`, { cause: error });
    }
    async function playRound(round: number) {
      const where = `seed ${seed}, round ${round}`;
      const base = replica;
      const baseShape = known ?? shape(base);
      // Read once: the plans' sessions start from copies of it.
      const projection = projectDocument(replica, timelineSchema);
      const baseVersion = encodeVersion(base.oplogVersion());
      const size = 2 + next(2);
      // In a triple, the last plan is sometimes made after the first one's answer, on what it left.
      const chained = size === 3 && next(2) === 0;
      const plans = Array.from({ length: chained ? 2 : size }, (_, index) =>
        makePlan(base, `${seed}-${round}-${index}`, next, unique, baseShape, projection),
      );
      const order = plans.map((_, index) => index).sort(() => next(2) - 0.5);
      const committed: Plan[] = [];
      let partial: Plan | undefined;
      const push = async (plan: Plan) => {
        counts.plans++;
        const result: PushResult = await host.push(documentId, plan.bytes, {});
        log.push(`${plan.name} ${JSON.stringify(plan.ops)} → ${JSON.stringify(result)}`);
        assert.notEqual(result.status, "rejected", `${where}: ${plan.name} ${JSON.stringify(result)}`);
        if (result.status === "committed") {
          assert.notEqual(result.duplicate, true, where);
          counts.committed++;
          committed.push(plan);
          return;
        }
        assert.ok(result.status === "conflicted" && !result.applied && result.reasons.length > 0, where);
        counts.conflicted++;
        if (next(4) !== 0) return;
        const rest = await host.push(documentId, plan.bytes, { applyRemaining: true });
        log.push(`  remaining → ${JSON.stringify(rest)}`);
        assert.equal(rest.status, "conflicted", `${where}: ${JSON.stringify(rest)}`);
        if (rest.status === "conflicted" && rest.applied) {
          counts.remainingApplied++;
          partial = plan;
        } else {
          assert.ok(
            rest.status === "conflicted" && rest.refused !== undefined,
            `${where}: ${JSON.stringify(rest)}`,
          );
          counts.remainingRefused++;
        }
      };
      for (const index of order) {
        const plan = plans[index]!;
        // Before the push: nothing staged; its own update's parts; a prefix of any plan of the round's;
        // or such a prefix, then its own parts (refused while the other's are staged).
        const staging = stageNext(4);
        if (staging >= 2)
          await stageParts(host, documentId, base, plans[stageNext(plans.length)]!, stageNext, false, counts);
        if (staging === 1 || staging === 3)
          await stageParts(host, documentId, base, plan, stageNext, true, counts);
        if (readNext(2) === 0) await host.rowLookup(documentId, toolListings);
        await push(plan);
        if (chained && index === order[0]) {
          // Made on the server's document after the first answer: it saw the first plan, if it landed.
          replica.import((await host.updatesSince(documentId, baseVersion)).bytes);
          await push(makePlan(replica, `${seed}-${round}-after`, next, unique, shape(replica)));
        }
      }
      replica.import((await host.updatesSince(documentId, baseVersion)).bytes);
      const final = shape(replica);
      known = final;
      assert.deepEqual(final.issues, [], `${where}: the document is valid`);
      // Every committed plan's net effect is there, but for what a later plan changed having seen it (the
      // chained plan, made on what the first one left).
      const after = chained ? committed.find((plan) => plan.name.endsWith("-after")) : undefined;
      for (const plan of committed) {
        const overridden = after !== undefined && plan === plans[order[0]!] ? after.effect : undefined;
        assert.deepEqual(
          missing(final, plan.effect, overridden),
          [],
          `${where}: committed ${plan.name} ${JSON.stringify(plan.ops)} is in the document`,
        );
      }
      if (partial !== undefined) return;
      // And nothing else changed: the document is the base with the committed plans' effects laid on.
      const expected = expectedShape(baseShape, committed);
      assert.deepEqual(
        sorted(final.entities),
        sorted(expected.entities),
        `${where}: entities as the oracle has them`,
      );
      assert.deepEqual(
        sorted(final.relations),
        sorted(expected.relations),
        `${where}: relations as the oracle has them`,
      );
      counts.rounds++;
    }
  }
}

/** Every entity with its claims and every relation, in pages as a tool lists them. */
const toolListings = [
  { members: "entity", claims: true, limit: 5000 },
  { members: "relation", limit: 5000 },
] as const;

/**
 * Rounds per store in an ordinary run: 300, and the three seeds below (360 rounds; 16 minutes on SQLite
 * at load 27). `TACKLE_PROPERTY_ROUNDS=5000` (seeds 1000–1249) is the issue's full run, an hour or more a
 * store on a loaded 2-core machine. Played 20 to a document, one test each, so no test nears the
 * runner's per-test timeout; document `n` plays seed 1000 + n. `TACKLE_PROPERTY_SEEDS` (`1127,1188`,
 * `1000-1124`) plays those seeds instead, to replay a failure or split a long run.
 */
const defaultRounds = 300;
const roundsPerDocument = 20;
/**
 * Seeds a step-replaying oracle once judged lost updates (a plan that moves a clip into a track and on
 * again, or deletes the track it placed one on, beside a plan deleting that track); played in every run.
 */
const misjudgedSeeds = [1127, 1188, 1228];

/** The seeds to play: one document of `roundsPerDocument` rounds each. */
export function seedsToPlay(environment: NodeJS.ProcessEnv): number[] {
  const listed = environment.TACKLE_PROPERTY_SEEDS;
  if (listed !== undefined && listed.trim() !== "")
    return listed.split(",").flatMap((part) => {
      const [first, last] = part.split("-").map((bound) => Number(bound.trim()));
      if (!Number.isInteger(first) || (last !== undefined && !Number.isInteger(last)))
        throw new Error(`TACKLE_PROPERTY_SEEDS: "${part}" is no seed or range`);
      return Array.from({ length: (last ?? first!) - first! + 1 }, (_, index) => first! + index);
    });
  const rounds = Number(environment.TACKLE_PROPERTY_ROUNDS ?? defaultRounds);
  const documents = Math.max(1, Math.ceil(rounds / roundsPerDocument));
  const seeds = Array.from({ length: documents }, (_, index) => 1000 + index);
  return [...seeds, ...misjudgedSeeds.filter((seed) => !seeds.includes(seed))];
}

/** Registers the property's tests over a store (a fresh one per suite). */
export function lostUpdateSuite(
  name: string,
  openStore: () => Promise<DocumentStore>,
  cleanup: () => Promise<void>,
  /** The host's options beyond its store and schema (the fork path of ADR 0496 forced, say). */
  hostOptions: Partial<DocumentHostOptions> = {},
): void {
  const seeds = seedsToPlay(process.env);
  const documents = seeds.length;
  const counts: RoundCounts = {
    rounds: 0,
    plans: 0,
    committed: 0,
    conflicted: 0,
    remainingApplied: 0,
    remainingRefused: 0,
    partsSent: 0,
    partsStaged: 0,
    judgedDetached: 0,
  };
  // Counts the pushes judged detached (ADR 0517), off the host's debug line for each push judged.
  const ignore = () => {};
  const logger: Logger = {
    debug(message, fields) {
      if (message === "docscript: push judged" && fields?.detached === true) counts.judgedDetached++;
    },
    info: ignore,
    warn: ignore,
    error: ignore,
  };
  describe(`the lost-update rule on ${name}: ${documents * roundsPerDocument} rounds of two or three concurrent plans`, () => {
    let host: DocumentHost;
    let store: DocumentStore;
    const snapshot = seedSnapshot();
    before(async () => {
      store = await openStore();
      host = new DocumentHost({ store, schema: timelineSchema, logger, ...hostOptions });
    });
    after(async () => {
      await host.close();
      await store.close();
      await cleanup();
    });
    for (const seed of seeds) {
      it(`seed ${seed}: no committed change lost, the document valid after every round`, async () => {
        const documentId = `doc-${seed}`;
        await host.create(documentId, "token-0123456789abcdef", snapshot);
        await playRounds(host, documentId, seed, roundsPerDocument, counts);
      });
    }
    it("the rounds met conflicts of every kind often enough to test the rule", (context) => {
      assert.ok(counts.rounds >= documents * roundsPerDocument * 0.9, JSON.stringify(counts));
      assert.ok(counts.conflicted >= documents * 2, JSON.stringify(counts));
      // Pushes were judged after parts of their own update and of others' (ADR 0508), some of them
      // in a detached replica (ADR 0517).
      assert.ok(counts.partsStaged > 0, JSON.stringify(counts));
      if (documents >= 10) assert.ok(counts.judgedDetached > 0, JSON.stringify(counts));
      // A replay of a few seeds may meet no `applyRemaining` of one kind; a run of many does.
      if (documents >= 10)
        assert.ok(
          counts.remainingApplied > 0 && counts.remainingRefused > 0 && counts.partsStaged < counts.partsSent,
          JSON.stringify(counts),
        );
      context.diagnostic(`${name}: ${JSON.stringify(counts)}`);
    });
  });
}
