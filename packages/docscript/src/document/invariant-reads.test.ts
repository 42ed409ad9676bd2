/**
 * Invariants that declare the fields they read (`reads`, ADR 0483): a write of fields alone that no
 * invariant reads is checked within its entities, one that an invariant reads is still checked with
 * the neighbours it reaches, and a declared invariant sees only what it declared.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { defineSchema, type Invariant } from "../schema/define-schema.ts";
import { field } from "../schema/field.ts";
import { SchemaDefinitionError } from "../schema/schema-definition-error.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { openDocument } from "./document-session.ts";

/** A holder whose parts must not be of negative size: read by the holder's invariant. */
function schemaWith(invariant: Partial<Invariant>) {
  return defineSchema({
    name: "parts",
    entities: {
      holder: { fields: { name: field.string({ nullable: true }) } },
      part: { fields: { size: field.number(), label: field.string({ nullable: true }) } },
    },
    relations: { has: { from: ["holder"], to: ["part"], cardinality: "one-to-many" } },
    invariants: [
      {
        name: "parts-not-negative",
        kinds: ["holder"],
        *checkEntity(holder, view) {
          for (const relation of view.relationsOf(holder.entityId, "has")) {
            const size = view.entity(relation.endpoint1EntityId)?.payload.size;
            if (typeof size === "number" && size < 0)
              yield { entityId: holder.entityId, path: [], message: "a part of negative size" };
          }
        },
        ...invariant,
      },
    ],
  });
}

function holding(schema: ReturnType<typeof schemaWith>) {
  const session = openDocument(new LoroDoc(), schema);
  const holder = session.entities.create({ entityKind: "holder", payload: {} });
  const parts = [1, 2, 3].map((size) => session.entities.create({ entityKind: "part", payload: { size } }));
  for (const part of parts)
    session.relations.link({
      relationKind: "has",
      endpoint0EntityId: holder.entityId,
      endpoint1EntityId: part.entityId,
    });
  // Only what comes next counts: a session over the document as it stands.
  const next = openDocument(session.doc, schema);
  return { session: next, holderId: holder.entityId, partIds: parts.map((part) => part.entityId) };
}

const issuesOf = (session: ReturnType<typeof openDocument>) =>
  session.check(session.changedScope()).map((issue) => `${issue.constraint} ${issue.entityId ?? ""}`);

describe("invariants that declare what they read", () => {
  it("a field write an invariant reads is checked on the neighbours that read it", () => {
    const { session, holderId, partIds } = holding(schemaWith({ reads: { part: ["size"] } }));
    session.entities.updateMany([{ entityId: partIds[1]!, ops: [{ op: "set", path: ["size"], value: -1 }] }]);
    assert.ok(new Set(session.changedScope().entityIds).has(holderId), "the holder is in reach");
    assert.deepEqual(issuesOf(session), [`invariant:parts-not-negative ${holderId}`]);
  });

  it("a field write no invariant reads is checked within its entities alone", () => {
    const { session, holderId, partIds } = holding(schemaWith({ reads: { part: ["size"] } }));
    session.entities.updateMany(
      partIds.map((entityId) => ({ entityId, ops: [{ op: "set", path: ["label"], value: "x" }] })),
    );
    const scope = session.changedScope();
    assert.equal(new Set(scope.entityIds).has(holderId), false, "the holder is not read");
    assert.deepEqual([...scope.relationIds], []);
    assert.deepEqual(issuesOf(session), []);
  });

  it("an invariant that declares nothing has every field write reach its neighbours", () => {
    const { session, holderId, partIds } = holding(schemaWith({}));
    session.entities.updateMany([
      { entityId: partIds[0]!, ops: [{ op: "set", path: ["label"], value: "x" }] },
    ]);
    assert.ok(new Set(session.changedScope().entityIds).has(holderId));
    session.entities.updateMany([{ entityId: partIds[2]!, ops: [{ op: "set", path: ["size"], value: -5 }] }]);
    assert.deepEqual(issuesOf(session), [`invariant:parts-not-negative ${holderId}`]);
  });

  it("a declared invariant sees only the fields it declared, in every check alike", () => {
    const schema = schemaWith({
      reads: { part: ["label"] },
      // Reads `size`, which it did not declare: it sees none, so it never finds a negative one.
    });
    const { session, partIds } = holding(schema);
    session.entities.updateMany([{ entityId: partIds[0]!, ops: [{ op: "set", path: ["size"], value: -1 }] }]);
    assert.deepEqual(issuesOf(session), []);
    // The whole-document check agrees with the scoped one.
    assert.doesNotThrow(() => openDocument(session.doc, schema).assertValid());
  });

  it("the timeline's invariant still refuses a caption clip's marker without a durationMs", () => {
    const session = openDocument(new LoroDoc(), timelineSchema);
    const track = session.entities.create({ entityKind: "track", payload: { role: "caption" } });
    const clip = session.entities.create({ entityKind: "clip", payload: {} });
    const caption = session.entities.create({ entityKind: "caption", payload: { text: "hi" } });
    const marker = session.entities.create({
      entityKind: "sequence-marker",
      payload: { startMs: 0, durationMs: 1000 },
    });
    for (const [relationKind, from, to] of [
      ["marker", clip.entityId, marker.entityId],
      ["contain", clip.entityId, caption.entityId],
      ["contain", track.entityId, clip.entityId],
    ] as const)
      session.relations.link({ relationKind, endpoint0EntityId: from, endpoint1EntityId: to });
    const next = openDocument(session.doc, timelineSchema);
    next.entities.updateMany([
      { entityId: marker.entityId, ops: [{ op: "set", path: ["startMs"], value: 5000 }] },
    ]);
    assert.equal(new Set(next.changedScope().entityIds).has(clip.entityId), false, "a start reads no clip");
    next.entities.updateMany([
      { entityId: marker.entityId, ops: [{ op: "set", path: ["durationMs"], value: null }] },
    ]);
    assert.deepEqual(
      next.check(next.changedScope()).map((issue) => issue.constraint),
      ["invariant:caption-clip-has-duration"],
    );
    // One entity's `update` is a field write too, checked alike.
    const single = openDocument(session.doc, timelineSchema);
    single.entities.update(marker.entityId, [{ op: "set", path: ["durationMs"], value: null }]);
    assert.deepEqual(
      single.check(single.changedScope()).map((issue) => issue.constraint),
      ["invariant:caption-clip-has-duration"],
    );
  });

  it("refuses reads naming a kind or field the schema lacks", () => {
    assert.throws(() => schemaWith({ reads: { widget: ["size"] } }), SchemaDefinitionError);
    assert.throws(() => schemaWith({ reads: { part: ["weight"] } }), /reads unknown field "part.weight"/);
  });
});
