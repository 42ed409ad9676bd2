/**
 * The server's check of a push of fields alone (ADR 0487): fields no invariant reads are checked within
 * their entities, without reading the neighbours; a field an invariant reads is checked over the whole
 * reach, and a push that breaks that invariant is refused as before.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { LoroDoc, type LoroMap } from "loro-crdt";
import { interpretDocument } from "../document/interpret.ts";
import { sampleTimelineSnapshot } from "../module/sample-timeline.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { DocumentHost } from "./document-host.ts";
import { type FieldVerdict, unreadFieldWrites } from "./field-writes.ts";
import { createSqliteDocumentStore } from "./sqlite-document-store.ts";

test("a push of fields no invariant reads reads no neighbour; one that breaks an invariant reading its field is refused", async () => {
  const store = createSqliteDocumentStore({ path: ":memory:" });
  const asked: string[] = [];
  const readMembers = store.readMembers.bind(store);
  const readRows = store.readRows.bind(store);
  store.readMembers = async (documentId, query) => {
    asked.push(JSON.stringify(query));
    return readMembers(documentId, query);
  };
  store.readRows = async (documentId, query) => {
    asked.push(JSON.stringify(query));
    return readRows(documentId, query);
  };
  const host = new DocumentHost({ store, schema: timelineSchema });
  try {
    assert.equal(await host.create("doc", "token-0123456789abcdef", sampleTimelineSnapshot()), true);
    const client = LoroDoc.fromSnapshot((await host.snapshot("doc")).bytes);
    const document = interpretDocument(client, timelineSchema);
    const caption = document.entities.find((entity) => entity.entityKind === "caption");
    assert.ok(caption !== undefined);
    const holding = (entityId: string, relationKind: string, end: 0 | 1) =>
      document.relations.find(
        (relation) =>
          relation.relationKind === relationKind &&
          (end === 1 ? relation.endpoint1EntityId : relation.endpoint0EntityId) === entityId,
      );
    const clipId = holding(caption.entityId, "contain", 1)?.endpoint0EntityId;
    assert.ok(clipId !== undefined);
    const trackId = holding(clipId, "contain", 1)?.endpoint0EntityId;
    const markerId = holding(clipId, "marker", 0)?.endpoint1EntityId;
    assert.ok(trackId !== undefined && markerId !== undefined);
    const markerFields = () =>
      (
        ((client.getMap("entities").get(clipId) as LoroMap).get("slots") as LoroMap).get("marker") as LoroMap
      ).get("fields") as LoroMap;
    const push = async (field: string, value: unknown) => {
      const from = client.oplogVersion();
      markerFields().set(field, value);
      client.commit();
      asked.length = 0;
      return host.push("doc", client.export({ mode: "update", from }));
    };

    // The start: read by no invariant. Checked within the marker: its clip's track and caption unread.
    const moved = await push("startMs", 700);
    assert.equal(moved.status, "committed", JSON.stringify(moved));
    assert.ok(asked.length > 0, "the first push reads the rows it changed from the store");
    for (const neighbour of [trackId, caption.entityId])
      assert.ok(
        !asked.some((query) => query.includes(neighbour)),
        `${neighbour} was read: ${asked.join("; ")}`,
      );
    // The store's rows and window index moved with it (its members kept, its numbers written again).
    const window = async (from: number, to: number) =>
      (
        await readMembers("doc", {
          type: "entity",
          kinds: ["sequence-marker"],
          range: { field: "startMs", from, to },
          limit: 100,
        })
      ).map((member) => member.id);
    assert.ok((await window(650, 750)).includes(markerId), "the marker is found at its new start");
    assert.ok(!(await window(450, 550)).includes(markerId), "and no longer at its old one");
    const [kept] = await readMembers("doc", { type: "entity", ids: [markerId], limit: 1 });
    const keptFields = (kept?.json as { slots?: { marker?: { fields?: Record<string, unknown> } } })?.slots
      ?.marker?.fields;
    assert.equal(keptFields?.startMs, 700);
    const counts = await store.countMembers("doc");
    assert.equal(counts.find((count) => count.kind === "sequence-marker")?.count, 3, "counts unmoved");

    // The duration: the caption invariant reads it. Checked over the clip's reach, and refused.
    const broken = await push("durationMs", null);
    assert.notEqual(broken.status, "committed", JSON.stringify(broken));
    assert.ok(
      "issues" in broken &&
        broken.issues.some((issue) => issue.constraint === "invariant:caption-clip-has-duration"),
      JSON.stringify(broken),
    );
    assert.ok(
      asked.some((query) => query.includes(caption.entityId)),
      "the caption was read",
    );
    const stored = interpretDocument(
      LoroDoc.fromSnapshot((await host.snapshot("doc")).bytes),
      timelineSchema,
    );
    const marker = stored.entities.find((entity) => entity.entityId === markerId);
    assert.equal(marker?.payload.startMs, 700);
    assert.equal(marker?.payload.durationMs, 2000, "the refused push stored nothing");
  } finally {
    await host.close();
  }
});

test("a change is of unread fields only when rows differ in field values an invariant does not read", () => {
  const row = (fields: Record<string, unknown>, more: Record<string, unknown> = {}) => ({
    kind: "clip",
    fields: {},
    slots: { marker: { id: "m1", kind: "sequence-marker", fields } },
    ...more,
  });
  const one = (before: unknown, after: unknown) =>
    unreadFieldWrites(timelineSchema, new Map([["c1", before]]), new Map([["c1", after]]));
  assert.deepEqual(one(row({ startMs: 1, durationMs: 5 }), row({ durationMs: 5, startMs: 2 })), ["m1"]);
  assert.deepEqual(one(row({ startMs: 1 }), row({ startMs: 1 })), []);
  assert.equal(one(row({ startMs: 1, durationMs: 5 }), row({ startMs: 1, durationMs: null })), undefined);
  assert.equal(one(row({ startMs: 1 }), row({ startMs: 1 }, { kind: "track" })), undefined);
  assert.equal(one(row({ startMs: 1 }), row({ startMs: 1 }, { variantOf: "c0" })), undefined);
  assert.equal(one(row({ startMs: 1 }), { ...row({ startMs: 1 }), slots: {} }), undefined);
  assert.equal(one(undefined, row({ startMs: 1 })), undefined);
  assert.equal(one(row({ startMs: 1 }), undefined), undefined);
});

test("a verdict told for a row's two values answers only for those very values", () => {
  const row = (startMs: number, more: Record<string, unknown> = {}) => ({
    kind: "clip",
    fields: {},
    slots: { marker: { id: "m1", kind: "sequence-marker", fields: { startMs } } },
    ...more,
  });
  const verdicts = new Map<string, FieldVerdict>();
  const before = row(1);
  const after = row(2);
  const told = (next: unknown) =>
    unreadFieldWrites(timelineSchema, new Map([["c1", before]]), new Map([["c1", next]]), verdicts);
  assert.deepEqual(told(after), ["m1"]);
  assert.deepEqual(verdicts.get("c1"), { before, after, written: ["m1"] });
  // Told again of the same objects: the verdict stands (a staged push's rows are not compared again).
  assert.deepEqual(told(after), ["m1"]);
  // The row read anew with more than fields changed: judged from its values, not the verdict.
  assert.equal(told(row(2, { kind: "track" })), undefined);
  assert.deepEqual(told(row(1)), []);
  // The row as it was, replaced in the projection by an equal copy: judged again, the same answer.
  const copy = structuredClone(before);
  assert.deepEqual(
    unreadFieldWrites(timelineSchema, new Map([["c1", copy]]), new Map([["c1", after]]), verdicts),
    ["m1"],
  );
  assert.equal(verdicts.get("c1")?.before, copy);
});
