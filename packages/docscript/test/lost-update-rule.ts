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
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { projectDocument } from "../src/document/interpret.ts";
import type { Projection } from "../src/document/projection.ts";
import { encodeVersion } from "../src/document/version.ts";
import { type DocumentSession, interpretDocument, openDocument, timelineSchema } from "../src/index.ts";
import { DocScriptError } from "../src/schema/docscript-error.ts";
import type { Entity } from "../src/schema/types.ts";
import { DocumentHost, type DocumentStore } from "../src/server/index.ts";
import type { PushResult } from "../src/server/push-result.ts";

/** One write of a plan, by the ids it was made on, so the oracle can apply it again. */
export type Op =
  | { readonly kind: "retime"; readonly clip: string; readonly startMs: number }
  | { readonly kind: "volume"; readonly clip: string; readonly value: number }
  | {
      readonly kind: "splice";
      readonly caption: string;
      readonly index: number;
      readonly deleteCount: number;
      readonly insert: string;
    }
  | { readonly kind: "delete-clip"; readonly clip: string }
  | { readonly kind: "delete-track"; readonly track: string }
  | { readonly kind: "move"; readonly clip: string; readonly track: string; readonly index: number }
  | {
      readonly kind: "add-caption";
      readonly track: string;
      readonly id: string;
      readonly startMs: number;
      readonly text: string;
      readonly index: number;
    }
  | { readonly kind: "add-track"; readonly track: string };

/** A small seeded generator (mulberry32), so a failing round names the seed that replays it. */
export function random(seed: number): (below: number) => number {
  let state = seed >>> 0;
  return (below) => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * below);
  };
}

const ofKind = (session: DocumentSession, kind: string) =>
  session.entities.list({ entityKind: kind }).map((entity) => entity.entityId);

function holderOf(session: DocumentSession, clip: string) {
  return session.relations
    .of(clip, "contain")
    .find((relation) => relation.endpoint1EntityId === clip && relation.relationKind === "contain");
}

/** Applies one op; throws what the session throws. */
export function apply(session: DocumentSession, op: Op): void {
  switch (op.kind) {
    case "retime": {
      const marker = session.relations.of(op.clip, "marker").find((r) => r.endpoint0EntityId === op.clip);
      if (marker === undefined) throw new DocScriptError("entity_not_found", `no marker on ${op.clip}`);
      session.entities.update(marker.endpoint1EntityId, [
        { op: "set", path: ["startMs"], value: op.startMs },
      ]);
      return;
    }
    case "volume":
      session.entities.update(op.clip, [{ op: "set", path: ["volume"], value: op.value }]);
      return;
    case "splice":
      session.entities.update(op.caption, [
        { op: "splice", path: ["text"], index: op.index, deleteCount: op.deleteCount, insert: op.insert },
      ]);
      return;
    case "delete-clip": {
      const content = session.relations
        .of(op.clip, "contain")
        .find((relation) => relation.endpoint0EntityId === op.clip)?.endpoint1EntityId;
      session.entities.delete(op.clip);
      if (content !== undefined && session.entities.get(content)?.entityKind === "caption")
        session.entities.delete(content);
      return;
    }
    case "delete-track":
      session.entities.delete(op.track);
      return;
    case "move": {
      const held = holderOf(session, op.clip);
      if (held === undefined) throw new DocScriptError("relation_not_found", `${op.clip} is on no track`);
      session.relations.move(held.relationId, { endpoint0EntityId: op.track, index: op.index });
      return;
    }
    case "add-caption": {
      const caption = session.entities.create({
        entityKind: "caption",
        entityId: `caption-${op.id}`,
        payload: { text: op.text },
      });
      const clip = session.entities.create({ entityKind: "clip", entityId: `clip-${op.id}` });
      const marker = session.entities.create({
        entityKind: "sequence-marker",
        entityId: `marker-${op.id}`,
        payload: { startMs: op.startMs, durationMs: 1000 },
      });
      session.relations.link({
        relationKind: "marker",
        endpoint0EntityId: clip.entityId,
        endpoint1EntityId: marker.entityId,
      });
      session.relations.link({
        relationKind: "contain",
        endpoint0EntityId: clip.entityId,
        endpoint1EntityId: caption.entityId,
      });
      if (op.track === "") return; // unplaced (see the oracle)
      session.relations.link({
        relationKind: "contain",
        endpoint0EntityId: op.track,
        endpoint1EntityId: clip.entityId,
        index: op.index,
      });
      return;
    }
    case "add-track":
      session.entities.create({
        entityKind: "track",
        entityId: op.track,
        payload: { role: "caption", name: "subs" },
      });
      return;
  }
}

const letters = ["a", "é", "😀", " ", "z"];

/** A random op over what `session` holds, or undefined when it holds nothing the op needs. */
function randomOp(
  session: DocumentSession,
  next: (below: number) => number,
  unique: () => string,
): Op | undefined {
  const clips = ofKind(session, "clip");
  const tracks = ofKind(session, "track");
  const captions = ofKind(session, "caption");
  // Mostly among the first few, so concurrent plans often meet on one clip or track.
  const pick = (items: readonly string[]) =>
    items.length === 0
      ? undefined
      : items[next(2) === 0 ? next(Math.min(3, items.length)) : next(items.length)];
  const clip = pick(clips);
  const track = pick(tracks);
  const caption = pick(captions);
  const grow = clips.length < 4 ? 6 : clips.length > 14 ? 0 : 2;
  const choice = next(13 + grow);
  if (choice < 3 && clip !== undefined) return { kind: "retime", clip, startMs: next(10) * 1000 };
  if (choice < 5 && clip !== undefined) return { kind: "volume", clip, value: next(40) - 30 };
  if (choice < 7 && caption !== undefined)
    return {
      kind: "splice",
      caption,
      index: next(3),
      deleteCount: next(2),
      insert: Array.from({ length: next(3) }, () => letters[next(letters.length)]).join(""),
    };
  if (choice < 8 && clip !== undefined) return { kind: "delete-clip", clip };
  if (choice < 9 && track !== undefined && tracks.length > 1) return { kind: "delete-track", track };
  if (choice < 11 && clip !== undefined && track !== undefined)
    return { kind: "move", clip, track, index: next(4) };
  if (choice < 12 || tracks.length === 0) return { kind: "add-track", track: `track-${unique()}` };
  if (track !== undefined)
    return {
      kind: "add-caption",
      track,
      id: unique(),
      startMs: next(20) * 1000,
      text: `line ${next(100)}`,
      index: next(4),
    };
  return undefined;
}

/** What a plan changes, net of its steps: read off the document before and after it, not replayed. */
export interface Effect {
  /** Entities it created or changed, as it left them; undefined: deleted. */
  readonly entities: ReadonlyMap<string, Entity | undefined>;
  /** Relations (by kind and ends: their ids are random) it added, and those it removed. */
  readonly added: readonly string[];
  readonly removed: readonly string[];
}

/** A plan made on `base`: its ops (for the log), its update, and its net effect. */
interface Plan {
  readonly name: string;
  readonly ops: readonly Op[];
  readonly bytes: Uint8Array;
  readonly effect: Effect;
}

function makePlan(
  base: LoroDoc,
  name: string,
  next: (below: number) => number,
  unique: () => string,
  before: Shape,
  projection?: Projection,
): Plan {
  const doc = base.fork();
  // A random peer id per plan (a fork keeps its parent's), so which write wins a merge is left to chance.
  doc.setPeerId(BigInt(1 + next(2 ** 30)) * 1024n + BigInt(next(1024)));
  const from = doc.oplogVersion();
  const session = openDocument(doc, timelineSchema, projection === undefined ? {} : { projection });
  const ops: Op[] = [];
  const count = 1 + next(3);
  // The document as JSON before the next op (read only when an op wrote ops: reading it costs).
  let json: string | undefined;
  const written = () => `${encodeVersion(doc.oplogVersion())}+${doc.getPendingTxnLength()}`;
  for (let attempt = 0; attempt < 50 && ops.length < count; attempt++) {
    const op = randomOp(session, next, unique);
    if (op === undefined) continue;
    json ??= JSON.stringify(doc.toJSON());
    const was = written();
    try {
      apply(session, op);
    } catch (error) {
      if (!DocScriptError.isInstance(error)) throw error;
    }
    if (written() === was) continue;
    // An op that wrote nothing (a move to where the clip is) is no write of the plan; one that throws
    // part-way is reverted, and is none either.
    const now = JSON.stringify(doc.toJSON());
    if (now !== json) ops.push(op);
    json = now;
  }
  assert.ok(ops.length > 0, `plan ${name} wrote something`);
  assert.deepEqual(session.check(), [], `plan ${name} is valid on its own`);
  doc.commit({ message: JSON.stringify({ planId: `plan-${name}` }) });
  return { name, ops, bytes: doc.export({ mode: "update", from }), effect: effectOf(before, shape(doc)) };
}

type Shape = ReturnType<typeof shape>;

/** Entities by id and relations by kind and ends (with how many of each): what a document holds. */
function shape(doc: LoroDoc) {
  const read = interpretDocument(doc, timelineSchema);
  const relations = new Map<string, number>();
  for (const relation of read.relations) {
    const key = `${relation.relationKind} ${relation.endpoint0EntityId} → ${relation.endpoint1EntityId}`;
    relations.set(key, (relations.get(key) ?? 0) + 1);
  }
  return {
    issues: read.issues,
    entities: new Map(read.entities.map((entity) => [entity.entityId, entity] as const)),
    relations,
  };
}

/** The net effect of going from `before` to `after`. */
function effectOf(before: Shape, after: Shape): Effect {
  const entities = new Map<string, Entity | undefined>();
  for (const [entityId, entity] of after.entities)
    if (JSON.stringify(before.entities.get(entityId)) !== JSON.stringify(entity))
      entities.set(entityId, entity);
  for (const entityId of before.entities.keys())
    if (!after.entities.has(entityId)) entities.set(entityId, undefined);
  const added: string[] = [];
  const removed: string[] = [];
  for (const key of new Set([...before.relations.keys(), ...after.relations.keys()])) {
    const difference = (after.relations.get(key) ?? 0) - (before.relations.get(key) ?? 0);
    for (let count = 0; count < Math.abs(difference); count++) (difference > 0 ? added : removed).push(key);
  }
  return { entities, added, removed };
}

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
}

/** A document of three tracks holding six caption clips, as a snapshot. */
export function seedSnapshot(): Uint8Array {
  const doc = new LoroDoc();
  const session = openDocument(doc, timelineSchema);
  let counter = 0;
  for (const track of ["track-a", "track-b", "track-c"]) {
    apply(session, { kind: "add-track", track });
    for (let index = 0; index < 2; index++)
      apply(session, {
        kind: "add-caption",
        track,
        id: `seed-${counter++}`,
        startMs: index * 1000,
        text: "hello",
        index,
      });
  }
  doc.commit();
  return doc.export({ mode: "snapshot" });
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
  };
  describe(`the lost-update rule on ${name}: ${documents * roundsPerDocument} rounds of two or three concurrent plans`, () => {
    let host: DocumentHost;
    let store: DocumentStore;
    const snapshot = seedSnapshot();
    before(async () => {
      store = await openStore();
      host = new DocumentHost({ store, schema: timelineSchema });
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
      // A replay of a few seeds may meet no `applyRemaining` of one kind; a run of many does.
      if (documents >= 10)
        assert.ok(counts.remainingApplied > 0 && counts.remainingRefused > 0, JSON.stringify(counts));
      context.diagnostic(`${name}: ${JSON.stringify(counts)}`);
    });
  });
}
