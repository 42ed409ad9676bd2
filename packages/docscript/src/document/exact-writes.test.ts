/** A session write is exactly what was checked: own-key names only, well-formed text, whole or nothing. */
import assert from "node:assert/strict";
import { it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { defineSchema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { field } from "../schema/field.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { openDocument } from "./document-session.ts";
import { interpretDocument } from "./interpret.ts";

const inherited = ["constructor", "toString", "__proto__", "hasOwnProperty", "valueOf", "__defineGetter__"];

const stateOf = (doc: LoroDoc) => JSON.stringify(doc.toJSON());

it("refuses kinds, relation kinds and fields a plain object inherits, and leaves the document as it was", () => {
  const doc = new LoroDoc();
  const session = openDocument(doc, timelineSchema);
  const track = session.entities.create({ entityKind: "track", payload: { role: "bgm" } });
  const before = stateOf(doc);
  for (const name of inherited) {
    // As the host reads a script's JSON: `__proto__` arrives as an own key.
    const payload = JSON.parse(`{"role":"bgm",${JSON.stringify(name)}:"x"}`) as Record<string, unknown>;
    assert.throws(
      () => session.entities.create({ entityKind: "track", payload }),
      (error: unknown) => DocScriptError.isInstance(error),
    );
    assert.throws(
      () => session.entities.create({ entityKind: name }),
      (error: unknown) => DocScriptError.isInstance(error),
    );
    assert.throws(
      () => session.entities.update(track.entityId, [{ op: "set", path: [name], value: "x" }]),
      (error: unknown) => DocScriptError.isInstance(error),
    );
    assert.throws(
      () =>
        session.relations.link({
          relationKind: name,
          endpoint0EntityId: track.entityId,
          endpoint1EntityId: track.entityId,
        }),
      (error: unknown) => DocScriptError.isInstance(error),
    );
  }
  assert.equal(stateOf(doc), before, "no refused write reached the document");
  assert.deepEqual(interpretDocument(doc, timelineSchema).entities.length, 1);
});

it("refuses text with a lone surrogate before it reaches Loro, and an entity id that is no plain name", () => {
  const doc = new LoroDoc();
  const session = openDocument(doc, timelineSchema);
  const before = stateOf(doc);
  const payload = JSON.parse('{"role":"bgm","name":"a\\ud800b"}') as Record<string, unknown>;
  assert.throws(
    () => session.entities.create({ entityKind: "track", payload }),
    (error: unknown) =>
      DocScriptError.isInstance(error) && error.issues.some((issue) => issue.constraint === "field.encoding"),
  );
  for (const entityId of ["", "a b", "x".repeat(201), "__proto__", "a\u0000", "../x", "a#b"])
    assert.throws(
      () => session.entities.create({ entityKind: "track", entityId, payload: { role: "bgm" } }),
      (error: unknown) => DocScriptError.isInstance(error) && error.code === "invalid_operation",
      entityId,
    );
  assert.equal(stateOf(doc), before);
});

it("leaves nothing staged when a check throws part-way", () => {
  let armed = false;
  const schema = defineSchema({
    name: "notes",
    entities: { note: { fields: { body: field.string() } } },
    invariants: [
      {
        name: "explodes",
        kinds: ["note"],
        *checkEntity() {
          if (armed) throw new Error("the invariant broke");
          yield* [];
        },
      },
    ],
  });
  const doc = new LoroDoc();
  const session = openDocument(doc, schema);
  const note = session.entities.create({ entityKind: "note", payload: { body: "one" } });
  armed = true;
  const before = stateOf(doc);
  assert.throws(() => session.entities.update(note.entityId, [{ op: "set", path: ["body"], value: "two" }]));
  armed = false;
  assert.equal(stateOf(doc), before);
  assert.equal(
    session.entities.get(note.entityId)?.payload.body,
    "one",
    "the session reads what the document holds",
  );
  session.entities.update(note.entityId, [{ op: "set", path: ["body"], value: "three" }]);
  assert.equal(session.entities.get(note.entityId)?.payload.body, "three");
});

it("schema lookups find only what the schema defines", () => {
  assert.equal(Object.getPrototypeOf(timelineSchema.entities), null);
  assert.equal(Object.getPrototypeOf(timelineSchema.relations), null);
  assert.equal(Object.getPrototypeOf(timelineSchema.entities.track?.fields), null);
  assert.equal("constructor" in timelineSchema.entities, false);
});

it("reads what Loro holds after creates and links staged without reading their rows back", () => {
  const schema = defineSchema({
    name: "shapes",
    entities: {
      shape: {
        fields: {
          label: field.string({ optional: true }),
          note: field.text(),
          size: field.number(),
          tags: field.list(field.string()),
          box: field.record({ width: field.number(), depth: field.number({ optional: true }) }),
        },
      },
    },
    relations: { near: { from: ["shape"], to: ["shape"], ordered: true } },
  });
  const doc = new LoroDoc();
  const session = openDocument(doc, schema);
  const payloads = [
    { label: "a", note: "n", size: 1.5, tags: ["x", "y"], box: { width: 2, depth: 3 } },
    // Not stored as given: an undefined field, -0 (read back as 0), an undefined field of a record.
    { label: undefined, note: "", size: -0, tags: [], box: { width: -0, depth: undefined } },
    { note: "ü 😀", size: 0, tags: ["z"], box: { width: 1 } },
  ];
  const ids = payloads.map((payload) => session.entities.create({ entityKind: "shape", payload }).entityId);
  for (const [index, entityId] of ids.entries())
    session.relations.link({
      relationKind: "near",
      endpoint0EntityId: ids[0] as string,
      endpoint1EntityId: entityId,
      ...(index === 2 ? { index: 0 } : {}),
    });
  const fresh = interpretDocument(doc, schema);
  for (const entity of fresh.entities) assert.deepStrictEqual(session.entities.get(entity.entityId), entity);
  assert.deepStrictEqual(session.relations.list(), fresh.relations);
});
