import assert from "node:assert/strict";
import { it } from "node:test";
import fc from "fast-check";
import { LoroDoc } from "loro-crdt";
import { DocScriptError } from "../schema/docscript-error.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { type DocumentSession, openDocument } from "./document-session.ts";
import { interpretDocument } from "./interpret.ts";

/** One random script step; indexes pick among what exists when the step runs. */
type Step =
  | { readonly kind: "track"; readonly role: number }
  | { readonly kind: "caption"; readonly text: string }
  | { readonly kind: "audio"; readonly key: number }
  | { readonly kind: "clip"; readonly content: number; readonly track: number; readonly index: number }
  | { readonly kind: "volume"; readonly clip: number; readonly value: number }
  | {
      readonly kind: "splice";
      readonly caption: number;
      readonly index: number;
      readonly deleteCount: number;
      readonly insert: string;
    }
  | { readonly kind: "delete"; readonly entity: number }
  | { readonly kind: "move"; readonly clip: number; readonly index: number };

const text = fc.string({ unit: fc.constantFrom("a", "é", "😀", " ", "z"), maxLength: 6 });
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("track" as const), role: fc.nat(6) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("caption" as const), text }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("audio" as const), key: fc.nat(4) }) },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("clip" as const),
      content: fc.nat(),
      track: fc.nat(),
      index: fc.nat(5),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("volume" as const),
      clip: fc.nat(),
      value: fc.integer({ min: -70, max: 20 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("splice" as const),
      caption: fc.nat(),
      index: fc.nat(8),
      deleteCount: fc.nat(3),
      insert: text,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("delete" as const), entity: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant("move" as const), clip: fc.nat(), index: fc.nat(5) }),
  },
);

const roles = ["video", "overlay", "audio", "bgm", "voiceover", "caption", "karaoke"];

function pick<T>(items: readonly T[], index: number): T | undefined {
  return items.length === 0 ? undefined : items[index % items.length];
}

/** Runs a step; a refused write must leave the document exactly as it was. */
function run(session: DocumentSession, current: Step): void {
  const before = JSON.stringify(session.doc.toJSON());
  const ofKind = (kind: string) =>
    session.entities.list({ entityKind: kind }).map((entity) => entity.entityId);
  try {
    switch (current.kind) {
      case "track":
        session.entities.create({ entityKind: "track", payload: { role: roles[current.role] } });
        return;
      case "caption":
        session.entities.create({ entityKind: "caption", payload: { text: current.text } });
        return;
      case "audio":
        session.entities.create({
          entityKind: "audio",
          payload: { system: "files", key: `k${current.key}` },
        });
        return;
      case "clip": {
        const content = pick([...ofKind("audio"), ...ofKind("caption")], current.content);
        const track = pick(ofKind("track"), current.track);
        if (content === undefined || track === undefined) return;
        const clip = session.entities.create({ entityKind: "clip" });
        const marker = session.entities.create({
          entityKind: "sequence-marker",
          payload: { startMs: 0, durationMs: 1000 },
        });
        session.relations.link({
          relationKind: "marker",
          endpoint0EntityId: clip.entityId,
          endpoint1EntityId: marker.entityId,
        });
        session.relations.link({
          relationKind: "contain",
          endpoint0EntityId: clip.entityId,
          endpoint1EntityId: content,
        });
        session.relations.link({
          relationKind: "contain",
          endpoint0EntityId: track,
          endpoint1EntityId: clip.entityId,
          index: current.index,
        });
        return;
      }
      case "volume": {
        const clip = pick(ofKind("clip"), current.clip);
        if (clip !== undefined)
          session.entities.update(clip, [{ op: "set", path: ["volume"], value: current.value }]);
        return;
      }
      case "splice": {
        const caption = pick(ofKind("caption"), current.caption);
        if (caption === undefined) return;
        session.entities.update(caption, [
          {
            op: "splice",
            path: ["text"],
            index: current.index,
            deleteCount: current.deleteCount,
            insert: current.insert,
          },
        ]);
        return;
      }
      case "delete": {
        const entity = pick(
          session.entities.list().map((item) => item.entityId),
          current.entity,
        );
        if (entity !== undefined) session.entities.delete(entity);
        return;
      }
      case "move": {
        const held = session.relations
          .list({ relationKind: "contain" })
          .filter((relation) => relation.endpoint1EntityId.startsWith("clip-"));
        const relation = pick(held, current.clip);
        if (relation !== undefined) session.relations.move(relation.relationId, { index: current.index });
        return;
      }
    }
  } catch (error) {
    if (!DocScriptError.isInstance(error)) throw error;
    assert.equal(
      JSON.stringify(session.doc.toJSON()),
      before,
      `refused ${current.kind} changed the document`,
    );
  }
}

function view(session: DocumentSession) {
  return {
    entities: session.entities.list().sort((left, right) => (left.entityId < right.entityId ? -1 : 1)),
    relations: session.relations.list(),
    issues: session.check(),
  };
}

it("what a session writes reads back identically after export and import, refused writes change nothing", () => {
  fc.assert(
    fc.property(fc.array(step, { minLength: 5, maxLength: 40 }), (steps) => {
      const doc = new LoroDoc();
      doc.setPeerId(1);
      const session = openDocument(doc, timelineSchema);
      for (const current of steps) run(session, current);
      doc.commit();
      const written = view(session);
      const copy = LoroDoc.fromSnapshot(doc.export({ mode: "snapshot" }));
      assert.deepEqual(interpretDocument(copy, timelineSchema), written);
      assert.deepEqual(view(openDocument(copy, timelineSchema)), written);
    }),
    { numRuns: 60 },
  );
});

it("two replicas editing concurrently converge to the same entities, relations and issues", () => {
  fc.assert(
    fc.property(
      fc.array(step, { minLength: 5, maxLength: 20 }),
      fc.array(step, { maxLength: 12 }),
      fc.array(step, { maxLength: 12 }),
      (shared, left, right) => {
        const base = new LoroDoc();
        base.setPeerId(1);
        const seed = openDocument(base, timelineSchema);
        for (const current of shared) run(seed, current);
        base.commit();
        const leftDoc = base.fork();
        leftDoc.setPeerId(2);
        const rightDoc = base.fork();
        rightDoc.setPeerId(3);
        const leftSession = openDocument(leftDoc, timelineSchema);
        const rightSession = openDocument(rightDoc, timelineSchema);
        for (const current of left) run(leftSession, current);
        for (const current of right) run(rightSession, current);
        leftDoc.commit();
        rightDoc.commit();
        leftDoc.import(rightDoc.export({ mode: "update", from: base.oplogVersion() }));
        rightDoc.import(leftDoc.export({ mode: "update", from: base.oplogVersion() }));
        assert.deepEqual(
          interpretDocument(leftDoc, timelineSchema),
          interpretDocument(rightDoc, timelineSchema),
        );
      },
    ),
    { numRuns: 40 },
  );
});
