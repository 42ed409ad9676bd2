/**
 * The lost-update property's plans: random ops over a small timeline, a plan made of them on a fork of
 * a base version (on a random peer id), and its net effect read off the document before and after.
 */
import assert from "node:assert/strict";
import { seededRandom } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import type { Projection } from "../src/document/projection.ts";
import { encodeVersion } from "../src/document/version.ts";
import { type DocumentSession, interpretDocument, openDocument, timelineSchema } from "../src/index.ts";
import { DocScriptError } from "../src/schema/docscript-error.ts";
import type { Entity } from "../src/schema/types.ts";

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

/** A seeded integer below `below` (mulberry32), so a failing round names the seed that replays it. */
export function random(seed: number): (below: number) => number {
  const next = seededRandom(seed);
  return (below) => Math.floor(next() * below);
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
      if (marker === undefined) throw DocScriptError.notFound("entity", op.clip, `no marker on ${op.clip}`);
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
      if (held === undefined) throw DocScriptError.notFound("relation", op.clip, `${op.clip} is on no track`);
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
export interface Plan {
  readonly name: string;
  readonly ops: readonly Op[];
  readonly bytes: Uint8Array;
  readonly effect: Effect;
}

export function makePlan(
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

export type Shape = ReturnType<typeof shape>;

/** Entities by id and relations by kind and ends (with how many of each): what a document holds. */
export function shape(doc: LoroDoc) {
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
