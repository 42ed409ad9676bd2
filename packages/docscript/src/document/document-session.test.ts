import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isNotFound } from "@tackle/core";
import { LoroDoc } from "loro-crdt";
import { DocScriptError } from "../schema/docscript-error.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { openDocument } from "./document-session.ts";
import { interpretDocument, projectDocument } from "./interpret.ts";

function freshSession(peer = 1) {
  const doc = new LoroDoc();
  doc.setPeerId(peer);
  return openDocument(doc, timelineSchema);
}

function seedClip(session: ReturnType<typeof freshSession>) {
  const track = session.entities.create({ entityKind: "track", payload: { role: "bgm" } });
  const audio = session.entities.create({ entityKind: "audio", payload: { system: "files", key: "k1" } });
  const clip = session.entities.create({ entityKind: "clip" });
  const marker = session.entities.create({
    entityKind: "sequence-marker",
    payload: { startMs: 0, durationMs: 1000 },
  });
  session.relations.link({
    relationKind: "contain",
    endpoint0EntityId: track.entityId,
    endpoint1EntityId: clip.entityId,
  });
  session.relations.link({
    relationKind: "marker",
    endpoint0EntityId: clip.entityId,
    endpoint1EntityId: marker.entityId,
  });
  session.relations.link({
    relationKind: "contain",
    endpoint0EntityId: clip.entityId,
    endpoint1EntityId: audio.entityId,
  });
  return { track, audio, clip, marker };
}

function refusal(code: string, constraint?: string, entityId?: string, path?: (string | number)[]) {
  return (error: unknown) => {
    assert.ok(DocScriptError.isInstance(error), String(error));
    assert.equal(error.code, code);
    if (constraint !== undefined) assert.equal(error.issues[0]?.constraint, constraint);
    if (entityId !== undefined) assert.equal(error.issues[0]?.entityId, entityId);
    if (path !== undefined) assert.deepEqual(error.issues[0]?.path, path);
    return true;
  };
}

describe("document session: writes, refusals and the clip's slots", () => {
  it("runs the reference example script as written", () => {
    const session = freshSession();
    seedClip(session);
    const bgm = session.entities
      .list()
      .find((entity) => entity.entityKind === "track" && entity.payload.role === "bgm");
    assert.ok(bgm);
    const [held] = session.relations
      .of(bgm.entityId, "contain")
      .filter((relation) => relation.endpoint0EntityId === bgm.entityId);
    assert.ok(held);
    session.entities.update(held.endpoint1EntityId, [{ op: "set", path: ["volume"], value: -6 }]);
    assert.equal(session.entities.get(held.endpoint1EntityId)?.payload.volume, -6);
    assert.deepEqual(session.check(), []);
  });

  it("refuses a write that breaks a constraint, naming entity, path and constraint, and changes nothing", () => {
    const session = freshSession();
    const { clip } = seedClip(session);
    const before = JSON.stringify(session.doc.toJSON());
    assert.throws(
      () => session.entities.update(clip.entityId, [{ op: "set", path: ["volume"], value: 40 }]),
      refusal("schema_violation", "field.max", clip.entityId, ["volume"]),
    );
    assert.throws(
      () =>
        session.entities.update(clip.entityId, [
          { op: "set", path: ["speed"], value: 2 },
          { op: "set", path: ["name"], value: 7 },
        ]),
      refusal("schema_violation", "field.type", clip.entityId, ["name"]),
    );
    assert.throws(
      () => session.entities.create({ entityKind: "track", payload: { role: "karaoke" } }),
      refusal("schema_violation", "field.enum", undefined, ["role"]),
    );
    assert.throws(
      () => session.entities.create({ entityKind: "track", payload: {} }),
      refusal("schema_violation", "field.required", undefined, ["role"]),
    );
    assert.throws(() => session.entities.create({ entityKind: "planet" }), refusal("unknown_kind"));
    assert.throws(
      () => session.entities.update("nobody", []),
      (error: unknown) => isNotFound(error, "entity"),
    );
    assert.throws(
      () => session.entities.update(clip.entityId, [{ op: "set", path: ["colour"], value: 1 }]),
      refusal("invalid_operation", "operation", clip.entityId, ["colour"]),
    );
    assert.equal(JSON.stringify(session.doc.toJSON()), before);
    assert.equal(session.entities.get(clip.entityId)?.payload.speed, 1);
  });

  it("defers the clip's marker and content to the whole-document check", () => {
    const session = freshSession();
    const clip = session.entities.create({ entityKind: "clip" });
    const marker = session.entities.create({ entityKind: "sequence-marker", payload: { startMs: 5 } });
    const constraints = session.check().map((issue) => `${issue.constraint} ${issue.entityId}`);
    assert.deepEqual(
      constraints.sort(),
      [
        `slot.embedded ${marker.entityId}`,
        `slot.required ${clip.entityId}`,
        `slot.required ${clip.entityId}`,
      ].sort(),
    );
    assert.throws(() => session.assertValid(), refusal("document_invalid"));
  });

  it("stores the marker on the clip's row; deleting the clip takes the marker and nothing else", () => {
    const session = freshSession();
    const { clip, marker, audio, track } = seedClip(session);
    const row = (session.doc.toJSON() as { entities: Record<string, { slots?: Record<string, unknown> }> })
      .entities[clip.entityId];
    assert.deepEqual(row?.slots?.content, audio.entityId);
    assert.equal((row?.slots?.marker as { id?: string } | undefined)?.id, marker.entityId);
    assert.equal(
      (session.doc.toJSON() as { entities: Record<string, unknown> }).entities[marker.entityId],
      undefined,
    );
    session.entities.delete(clip.entityId);
    assert.equal(session.entities.get(marker.entityId), undefined);
    assert.ok(session.entities.get(audio.entityId));
    assert.deepEqual(session.relations.of(track.entityId), []);
    assert.deepEqual(session.check(), []);
  });

  it("deleting content leaves its clip without content until it gets new content", () => {
    const session = freshSession();
    const { clip, audio } = seedClip(session);
    session.entities.delete(audio.entityId);
    assert.deepEqual(
      session.check().map((issue) => [issue.constraint, issue.entityId]),
      [["slot.required", clip.entityId]],
    );
  });
});

describe("document session: relations' cardinality and order", () => {
  it("refuses a second marker on a clip and a clip on two tracks", () => {
    const session = freshSession();
    const { clip } = seedClip(session);
    const other = session.entities.create({ entityKind: "sequence-marker", payload: { startMs: 0 } });
    assert.throws(
      () =>
        session.relations.link({
          relationKind: "marker",
          endpoint0EntityId: clip.entityId,
          endpoint1EntityId: other.entityId,
        }),
      refusal("schema_violation", "relation.cardinality", clip.entityId),
    );
    const second = session.entities.create({ entityKind: "track", payload: { role: "audio" } });
    assert.throws(
      () =>
        session.relations.link({
          relationKind: "contain",
          endpoint0EntityId: second.entityId,
          endpoint1EntityId: clip.entityId,
        }),
      refusal("schema_violation", "relation.cardinality"),
    );
    assert.throws(
      () =>
        session.relations.link({
          relationKind: "contain",
          endpoint0EntityId: second.entityId,
          endpoint1EntityId: other.entityId,
        }),
      refusal("schema_violation", "relation.endpoint-kind"),
    );
  });

  it("keeps ordered relations in order through link at an index and move", () => {
    const session = freshSession();
    const { track, clip } = seedClip(session);
    const audio = session.entities.list({ entityKind: "audio" })[0];
    assert.ok(audio);
    const more = [1, 2, 3].map((index) => {
      const next = session.entities.create({ entityKind: "clip", entityId: `clip-${index}` });
      const marker = session.entities.create({
        entityKind: "sequence-marker",
        payload: { startMs: index * 1000 },
      });
      session.relations.link({
        relationKind: "marker",
        endpoint0EntityId: next.entityId,
        endpoint1EntityId: marker.entityId,
      });
      session.relations.link({
        relationKind: "contain",
        endpoint0EntityId: next.entityId,
        endpoint1EntityId: audio.entityId,
      });
      return next;
    });
    session.relations.link({
      relationKind: "contain",
      endpoint0EntityId: track.entityId,
      endpoint1EntityId: "clip-1",
      index: 0,
    });
    session.relations.link({
      relationKind: "contain",
      endpoint0EntityId: track.entityId,
      endpoint1EntityId: "clip-2",
    });
    session.relations.link({
      relationKind: "contain",
      endpoint0EntityId: track.entityId,
      endpoint1EntityId: "clip-3",
      index: 1,
    });
    const order = () =>
      session.relations.of(track.entityId, "contain").map((relation) => relation.endpoint1EntityId);
    assert.deepEqual(order(), ["clip-1", "clip-3", clip.entityId, "clip-2"]);
    const last = session.relations.of(track.entityId, "contain")[3];
    assert.ok(last);
    session.relations.move(last.relationId, { index: 0 });
    assert.deepEqual(order(), ["clip-2", "clip-1", "clip-3", clip.entityId]);
    assert.equal(more.length, 3);
    assert.deepEqual(session.check(), []);
  });
});

describe("document session: text, lists and variants", () => {
  it("splices text by code points and edits lists by index", () => {
    const session = freshSession();
    const caption = session.entities.create({ entityKind: "caption", payload: { text: "a😀b" } });
    session.entities.update(caption.entityId, [
      { op: "splice", path: ["text"], index: 2, deleteCount: 1, insert: "ç" },
    ]);
    assert.equal(session.entities.get(caption.entityId)?.payload.text, "a😀ç");
    const script = session.entities.create({
      entityKind: "audio-script",
      payload: { segments: [{ startMs: 0, endMs: 10, text: "a" }] },
    });
    session.entities.update(script.entityId, [
      { op: "insert", path: ["segments", 1], value: { startMs: 10, endMs: 20, text: "b" } },
      { op: "set", path: ["segments", 0, "text"], value: "A" },
    ]);
    assert.deepEqual(
      ((session.entities.get(script.entityId)?.payload.segments ?? []) as { text: string }[]).map(
        (segment) => segment.text,
      ),
      ["A", "b"],
    );
    session.entities.update(script.entityId, [{ op: "remove", path: ["segments", 0] }]);
    assert.equal(((session.entities.get(script.entityId)?.payload.segments ?? []) as unknown[]).length, 1);
    assert.throws(
      () => session.entities.update(script.entityId, [{ op: "remove", path: ["segments", 5] }]),
      refusal("invalid_operation"),
    );
  });

  it("merges concurrent splices in one text and inserts in one list", () => {
    const left = freshSession(1);
    const caption = left.entities.create({ entityKind: "caption", payload: { text: "hello world" } });
    const script = left.entities.create({ entityKind: "audio-script", payload: { segments: [] } });
    left.doc.commit();
    const rightDoc = left.doc.fork();
    rightDoc.setPeerId(2);
    const right = openDocument(rightDoc, timelineSchema);
    left.entities.update(caption.entityId, [
      { op: "splice", path: ["text"], index: 0, deleteCount: 1, insert: "H" },
    ]);
    right.entities.update(caption.entityId, [{ op: "splice", path: ["text"], index: 11, insert: "!" }]);
    left.entities.update(script.entityId, [
      { op: "insert", path: ["segments", 0], value: { startMs: 0, endMs: 1, text: "l" } },
    ]);
    right.entities.update(script.entityId, [
      { op: "insert", path: ["segments", 0], value: { startMs: 1, endMs: 2, text: "r" } },
    ]);
    left.doc.commit();
    right.doc.commit();
    left.doc.import(right.doc.export({ mode: "update" }));
    const merged = openDocument(left.doc, timelineSchema);
    assert.equal(merged.entities.get(caption.entityId)?.payload.text, "Hello world!");
    assert.equal(((merged.entities.get(script.entityId)?.payload.segments ?? []) as unknown[]).length, 2);
  });

  it("reads a variant with its base applied and stores only what it overrides", () => {
    const session = freshSession();
    const base = session.entities.create({
      entityKind: "caption",
      payload: { text: "Hello", style: { position: "top", fontSize: 40 } },
    });
    const variant = session.entities.create({
      entityKind: "caption",
      variantOf: base.entityId,
      payload: { language: "fr" },
    });
    session.entities.update(variant.entityId, [
      { op: "splice", path: ["text"], index: 0, deleteCount: 5, insert: "Bonjour" },
    ]);
    const read = session.entities.get(variant.entityId);
    assert.equal(read?.payload.text, "Bonjour");
    assert.deepEqual(read?.payload.style, { position: "top", fontSize: 40 });
    assert.equal(read?.variantOf, base.entityId);
    session.entities.update(base.entityId, [{ op: "set", path: ["style", "fontSize"], value: 20 }]);
    assert.deepEqual(session.entities.get(variant.entityId)?.payload.style, {
      position: "top",
      fontSize: 20,
    });
    assert.equal(session.entities.get(base.entityId)?.payload.text, "Hello");
    const stored = (session.doc.toJSON() as { entities: Record<string, { fields: Record<string, unknown> }> })
      .entities[variant.entityId];
    assert.deepEqual(Object.keys(stored?.fields ?? {}).sort(), ["language", "text"]);
    assert.throws(
      () =>
        session.entities.create({ entityKind: "track", variantOf: base.entityId, payload: { role: "bgm" } }),
      refusal("schema_violation", "entity.variant"),
    );
  });
});

describe("document session: media, captions, copies and versions", () => {
  it("keeps one medium per stored file, host-only facts and fixed transcription files", () => {
    const session = freshSession();
    const audio = session.entities.create({
      entityKind: "audio",
      payload: { system: "files", key: "same" },
    });
    assert.equal(
      session.entities.create({ entityKind: "video", payload: { system: "files", key: "same" } }).entityId,
      audio.entityId,
    );
    assert.notEqual(
      session.entities.create({ entityKind: "audio", payload: { system: "speech", key: "same" } }).entityId,
      audio.entityId,
    );
    assert.throws(
      () => session.entities.update(audio.entityId, [{ op: "set", path: ["storageKey"], value: "s3://x" }]),
      refusal("host_only_field", "field.hostOnly", audio.entityId, ["storageKey"]),
    );
    assert.throws(
      () =>
        session.entities.create({
          entityKind: "audio",
          payload: { system: "files", key: "k", digest: "d" },
        }),
      refusal("host_only_field"),
    );
    const host = openDocument(session.doc, timelineSchema, { role: "host" });
    host.entities.update(audio.entityId, [{ op: "set", path: ["storageKey"], value: "s3://x" }]);
    assert.equal(host.entities.get(audio.entityId)?.payload.storageKey, "s3://x");
    const script = host.entities.create({ entityKind: "audio-script", payload: { segments: [] } });
    host.entities.update(script.entityId, [
      { op: "set", path: ["transcription"], value: { system: "files", key: "t1" } },
    ]);
    assert.throws(
      () =>
        host.entities.update(script.entityId, [{ op: "set", path: ["transcription", "key"], value: "t2" }]),
      refusal("schema_violation", "field.fixed", script.entityId, ["transcription"]),
    );
  });

  it("gives a caption no length of its own and asks its clip's marker for one", () => {
    const session = freshSession();
    const caption = session.entities.create({ entityKind: "caption", payload: { text: "hi" } });
    assert.equal(caption.payload.durationMs, null);
    assert.throws(
      () => session.entities.update(caption.entityId, [{ op: "set", path: ["durationMs"], value: 100 }]),
      refusal("schema_violation", "field.type"),
    );
    const clip = session.entities.create({ entityKind: "clip" });
    const marker = session.entities.create({ entityKind: "sequence-marker", payload: { startMs: 0 } });
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
    assert.deepEqual(
      session.check().map((issue) => [issue.constraint, issue.entityId, issue.path]),
      [["invariant:caption-clip-has-duration", marker.entityId, ["durationMs"]]],
    );
    session.entities.update(marker.entityId, [{ op: "set", path: ["durationMs"], value: 2000 }]);
    assert.deepEqual(session.check(), []);
  });

  it("round-trips through export and import: interpret reads back what the session wrote", () => {
    const session = freshSession();
    seedClip(session);
    const caption = session.entities.create({ entityKind: "caption", payload: { text: "x" } });
    session.entities.create({
      entityKind: "caption",
      variantOf: caption.entityId,
      payload: { language: "de" },
    });
    session.doc.commit();
    const written = interpretDocument(session.doc, timelineSchema);
    const copy = LoroDoc.fromSnapshot(session.doc.export({ mode: "snapshot" }));
    const fromUpdates = new LoroDoc();
    fromUpdates.import(session.doc.export({ mode: "update" }));
    assert.deepEqual(interpretDocument(copy, timelineSchema), written);
    assert.deepEqual(interpretDocument(fromUpdates, timelineSchema), written);
    assert.deepEqual(written.entities.length, 6);
    assert.deepEqual(written.relations.length, 3);
  });

  it("returns copies: changing a read changes nothing", () => {
    const session = freshSession();
    const { track } = seedClip(session);
    const read = session.entities.get(track.entityId) as { payload: Record<string, unknown> };
    read.payload.role = "video";
    (session.entities.list()[0] as { payload: Record<string, unknown> }).payload.role = "video";
    assert.equal(session.entities.get(track.entityId)?.payload.role, "bgm");
  });

  it("starts from a projection read earlier only while the document is still at that version", () => {
    const session = freshSession();
    const { clip } = seedClip(session);
    session.doc.commit();
    const projection = projectDocument(session.doc, timelineSchema);
    const first = openDocument(session.doc, timelineSchema, { projection });
    first.entities.update(clip.entityId, [{ op: "set", path: ["volume"], value: -4 }]);
    // The session worked on a copy: the cached projection still reads the old value.
    assert.equal(projection.entity(clip.entityId)?.payload.volume, 0);
    session.doc.commit();
    // The document moved on: the stale projection is ignored and the document read afresh.
    const second = openDocument(session.doc, timelineSchema, { projection });
    assert.equal(second.entities.get(clip.entityId)?.payload.volume, -4);
    assert.deepEqual(second.check(), []);
  });
});
