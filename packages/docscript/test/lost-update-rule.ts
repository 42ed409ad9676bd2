/**
 * The lost-update rule as a property (ADR 0475), run once per store: pairs and triples of random plans
 * made from one base version are pushed to the server's push pipeline in a random order, on random peer
 * ids. Every plan is answered `committed` or `conflicted`, and the document after the round equals the
 * committed plans applied one after another in the order they committed (the sequential oracle): no
 * committed change is lost, and the document is always valid. A conflicted plan is sometimes retried
 * with `applyRemaining`: stored, it keeps every other committed change and the document valid.
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

/** A plan made on `base`: its ops, its update, and what it leaves in the entities it touched. */
interface Plan {
  readonly name: string;
  readonly ops: readonly Op[];
  readonly bytes: Uint8Array;
  /** Entities the plan wrote, as it left them (undefined: deleted). */
  readonly leaves: ReadonlyMap<string, Entity | undefined>;
  /** Clips the plan placed, with the track it placed them on. */
  readonly placed: ReadonlyMap<string, string>;
}

function makePlan(
  base: LoroDoc,
  name: string,
  next: (below: number) => number,
  unique: () => string,
  projection?: Projection,
): Plan {
  const doc = base.fork();
  // A random peer id per plan (a fork keeps its parent's), so which write wins a merge is left to chance.
  doc.setPeerId(BigInt(1 + next(2 ** 30)) * 1024n + BigInt(next(1024)));
  const from = doc.oplogVersion();
  const session = openDocument(doc, timelineSchema, projection === undefined ? {} : { projection });
  const ops: Op[] = [];
  const count = 1 + next(3);
  for (let attempt = 0; attempt < 50 && ops.length < count; attempt++) {
    const op = randomOp(session, next, unique);
    if (op === undefined) continue;
    try {
      const before = JSON.stringify(doc.toJSON());
      apply(session, op);
      // An op that wrote nothing (a move to where the clip is) is no write of the plan.
      if (JSON.stringify(doc.toJSON()) !== before) ops.push(op);
    } catch (error) {
      if (!DocScriptError.isInstance(error)) throw error;
    }
  }
  assert.ok(ops.length > 0, `plan ${name} wrote something`);
  assert.deepEqual(session.check(), [], `plan ${name} is valid on its own`);
  const leaves = new Map<string, Entity | undefined>();
  const placed = new Map<string, string>();
  for (const op of ops) {
    const touched =
      op.kind === "add-caption"
        ? [`caption-${op.id}`, `clip-${op.id}`, `marker-${op.id}`]
        : op.kind === "retime"
          ? [
              session.relations.of(op.clip, "marker").find((r) => r.endpoint0EntityId === op.clip)
                ?.endpoint1EntityId ?? op.clip,
            ]
          : op.kind === "volume" || op.kind === "delete-clip"
            ? [op.clip]
            : op.kind === "splice"
              ? [op.caption]
              : op.kind === "delete-track" || op.kind === "add-track"
                ? [op.track]
                : [];
    for (const id of touched) leaves.set(id, session.entities.get(id));
    if (op.kind === "move") placed.set(op.clip, op.track);
    if (op.kind === "add-caption") placed.set(`clip-${op.id}`, op.track);
  }
  // Where the plan left them (a later op of the plan may have moved them on, or deleted their track).
  for (const clip of placed.keys()) {
    const holder = session.entities.get(clip) === undefined ? undefined : holderOf(session, clip);
    if (holder === undefined) placed.delete(clip);
    else placed.set(clip, holder.endpoint0EntityId);
  }
  doc.commit({ message: JSON.stringify({ planId: `plan-${name}` }) });
  return { name, ops, bytes: doc.export({ mode: "update", from }), leaves, placed };
}

/** Entities, relations (by kind and ends: their ids are random) and the clips each track holds. */
function shape(doc: LoroDoc) {
  const read = interpretDocument(doc, timelineSchema);
  const tracks = new Map<string, string[]>();
  for (const relation of read.relations) {
    if (relation.relationKind !== "contain" || !relation.endpoint0EntityId.startsWith("track")) continue;
    const clips = tracks.get(relation.endpoint0EntityId) ?? [];
    clips.push(relation.endpoint1EntityId);
    tracks.set(relation.endpoint0EntityId, clips);
  }
  return {
    issues: read.issues,
    entities: read.entities,
    relations: read.relations
      .map(
        (relation) =>
          `${relation.relationKind} ${relation.endpoint0EntityId} → ${relation.endpoint1EntityId}`,
      )
      .sort(),
    tracks,
  };
}

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
      const oracle = replica.fork();
      // Read once: the plans' and the oracle's sessions start from copies of it.
      const projection = projectDocument(replica, timelineSchema);
      const baseVersion = encodeVersion(base.oplogVersion());
      const size = 2 + next(2);
      // In a triple, the last plan is sometimes made after the first one's answer, on what it left.
      const chained = size === 3 && next(2) === 0;
      const plans = Array.from({ length: chained ? 2 : size }, (_, index) =>
        makePlan(base, `${seed}-${round}-${index}`, next, unique, projection),
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
          await push(makePlan(replica, `${seed}-${round}-after`, next, unique));
        }
      }
      replica.import((await host.updatesSince(documentId, baseVersion)).bytes);
      const after = shape(replica);
      assert.deepEqual(after.issues, [], `${where}: the document is valid`);
      // Every committed plan's writes are there, as it left them (but for one a later plan saw).
      const read = new Map(after.entities.map((entity) => [entity.entityId, entity]));
      for (const plan of committed) {
        if (chained && plan === plans[order[0]!]) continue;
        for (const [entityId, left] of plan.leaves)
          assert.deepEqual(
            read.get(entityId),
            left,
            `${where}: ${plan.name} ${JSON.stringify(plan.ops)} left ${entityId}`,
          );
        const tracks = after.tracks;
        for (const [clip, track] of plan.placed)
          assert.ok(tracks.get(track)?.includes(clip), `${where}: ${plan.name} placed ${clip} on ${track}`);
      }
      if (partial !== undefined) return;
      // The sequential oracle: the committed plans applied one after another in the order they committed.
      const session = openDocument(oracle, timelineSchema, { projection });
      for (const plan of committed) {
        for (const op of plan.ops) {
          // Two plans that both delete one entity lose nothing: the second delete finds it gone.
          const deletes =
            op.kind === "delete-clip" ? op.clip : op.kind === "delete-track" ? op.track : undefined;
          if (deletes !== undefined && session.entities.get(deletes) === undefined) continue;
          // A placement onto a track the same plan deletes later comes to nothing either way: when another
          // plan deleted that track (or the clip's holder) first, the placement is left out, not lost.
          const placedOn = op.kind === "move" || op.kind === "add-caption" ? op.track : undefined;
          const undoneLater =
            placedOn !== undefined &&
            plan.ops
              .slice(plan.ops.indexOf(op) + 1)
              .some(
                (later) =>
                  (later.kind === "delete-track" && later.track === placedOn) ||
                  (later.kind === "delete-clip" &&
                    op.kind === "add-caption" &&
                    later.clip === `clip-${op.id}`),
              );
          if (
            undoneLater &&
            (session.entities.get(placedOn) === undefined ||
              (op.kind === "move" && holderOf(session, op.clip) === undefined))
          ) {
            if (op.kind === "add-caption") apply(session, { ...op, track: "" } as Op);
            continue;
          }
          try {
            apply(session, op);
          } catch (error) {
            assert.fail(
              `${where}: committed ${plan.name} does not apply after the others: ${JSON.stringify(op)}: ${String(error)}`,
            );
          }
        }
      }
      oracle.commit();
      const expected = shape(oracle);
      const differing = expected.entities
        .filter((entity) => JSON.stringify(read.get(entity.entityId)) !== JSON.stringify(entity))
        .map(
          (entity) =>
            `${JSON.stringify(read.get(entity.entityId))} where the oracle has ${JSON.stringify(entity)}`,
        );
      assert.deepEqual(differing, [], `${where}: entities as the oracle has them`);
      assert.deepEqual(after.entities, expected.entities, `${where}: entities as the oracle has them`);
      assert.deepEqual(after.relations, expected.relations, `${where}: relations as the oracle has them`);
      counts.rounds++;
    }
  }
}

/**
 * Rounds per store in an ordinary run; `TACKLE_PROPERTY_ROUNDS=5000` is the issue's full run (tens of
 * minutes per store on a 2-core machine). Played 20 to a document,
 * one test each, so no test nears the runner's per-test timeout.
 */
const defaultRounds = 1000;
const roundsPerDocument = 20;

/** Registers the property's tests over a store (a fresh one per suite). */
export function lostUpdateSuite(
  name: string,
  openStore: () => Promise<DocumentStore>,
  cleanup: () => Promise<void>,
): void {
  const rounds = Number(process.env.TACKLE_PROPERTY_ROUNDS ?? defaultRounds);
  const documents = Math.max(1, Math.ceil(rounds / roundsPerDocument));
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
    for (let index = 0; index < documents; index++) {
      it(`document ${index}: no committed change lost, the document valid after every round`, async () => {
        const documentId = `doc-${index}`;
        await host.create(documentId, "token-0123456789abcdef", snapshot);
        await playRounds(host, documentId, 1000 + index, roundsPerDocument, counts);
      });
    }
    it("the rounds met conflicts of every kind often enough to test the rule", () => {
      assert.ok(counts.rounds >= documents * roundsPerDocument * 0.9, JSON.stringify(counts));
      assert.ok(counts.conflicted >= documents * 2, JSON.stringify(counts));
      assert.ok(counts.remainingApplied > 0 && counts.remainingRefused > 0, JSON.stringify(counts));
    });
  });
}
