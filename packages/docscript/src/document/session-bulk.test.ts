/**
 * Bulk edits: `entities.updateMany` lands many updates as one write (whole or nothing), and
 * `entities.list({ entityKind, range })` answers the entities whose number field lies in a window.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { largeTimeline } from "../../test/large-timeline.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { type DocumentSession, openDocument } from "./document-session.ts";
import { projectDocument } from "./interpret.ts";

// 500 image clips on track-1; clip i's marker starts at 8000 + 1000·i ms.
const { snapshot } = largeTimeline(500);
const open = (): DocumentSession => openDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema);
const startOf = (session: DocumentSession, index: number) =>
  session.entities.get(`large-marker-${index}`)?.payload.startMs;

function refusal(code: string, message: RegExp) {
  return (error: unknown) => {
    assert.ok(DocScriptError.isInstance(error), String(error));
    assert.equal(error.code, code);
    assert.match(error.message, message);
    return true;
  };
}

describe("entities.list with a range", () => {
  it("answers the kind's entities whose field is in [from, to), in id order, in pages", () => {
    const session = open();
    const window = session.entities.list({
      entityKind: "sequence-marker",
      range: { field: "startMs", from: 60_000, to: 70_000 },
    });
    const expected = Array.from({ length: 10 }, (_, index) => `large-marker-${52 + index}`).sort();
    assert.deepEqual(
      window.map((marker) => marker.entityId),
      expected,
    );
    const seen: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = session.entities.list({
        entityKind: "sequence-marker",
        range: { field: "startMs", from: 300_000 },
        limit: 50,
        ...(after === undefined ? {} : { after }),
      });
      seen.push(...page.map((marker) => marker.entityId));
      if (page.length < 50) break;
      after = page.at(-1)?.entityId;
    }
    // Markers of clips 292..499 start at or after 300 s.
    assert.equal(seen.length, 208);
    assert.equal(new Set(seen).size, 208);
    assert.ok(seen.every((id) => Number(id.split("-").at(-1)) >= 292));
  });

  it("refuses a range on a field that is no number field of the kind", () => {
    const session = open();
    assert.throws(
      () => session.entities.list({ entityKind: "sequence-marker", range: { field: "name" } }),
      refusal("invalid_operation", /range\.field names a number field/),
    );
    assert.throws(
      () => session.entities.list({ range: { field: "startMs" } }),
      refusal("invalid_operation", /needs an entityKind/),
    );
  });
});

describe("entities.updateMany", () => {
  it("lands every update as one write, the document valid", () => {
    const session = open();
    const markers = session.entities.list({
      entityKind: "sequence-marker",
      range: { field: "startMs", from: 100_000 },
    });
    const count = session.entities.updateMany([
      ...markers.map((marker) => ({
        entityId: marker.entityId,
        ops: [{ op: "set" as const, path: ["startMs"], value: (marker.payload.startMs as number) + 2000 }],
      })),
      // A clip and its marker share a row: both updates land.
      { entityId: "large-clip-499", ops: [{ op: "set" as const, path: ["volume"], value: -3 }] },
    ]);
    assert.equal(count, markers.length + 1);
    assert.equal(startOf(session, 499), 8000 + 499_000 + 2000);
    assert.equal(startOf(session, 91), 8000 + 91_000);
    assert.equal(session.entities.get("large-clip-499")?.payload.volume, -3);
    assert.deepEqual(session.check(), []);
    // What the document holds, read afresh, is what the session answered.
    const read = projectDocument(session.doc, timelineSchema);
    assert.equal(read.entity("large-marker-499")?.payload.startMs, 8000 + 499_000 + 2000);
    assert.equal(read.entity("large-clip-499")?.payload.volume, -3);
  });

  it("lands nothing when one update is refused", () => {
    const session = open();
    assert.throws(
      () =>
        session.entities.updateMany([
          { entityId: "large-marker-1", ops: [{ op: "set", path: ["startMs"], value: 1 }] },
          { entityId: "large-marker-2", ops: [{ op: "set", path: ["startMs"], value: -5 }] },
        ]),
      (error: unknown) => DocScriptError.isInstance(error),
    );
    assert.equal(startOf(session, 1), 9000);
    assert.equal(
      projectDocument(session.doc, timelineSchema).entity("large-marker-1")?.payload.startMs,
      9000,
    );
    assert.throws(
      () =>
        session.entities.updateMany([
          { entityId: "large-marker-1", ops: [{ op: "set", path: ["startMs"], value: 1 }] },
          { entityId: "no-such-entity", ops: [{ op: "set", path: ["startMs"], value: 1 }] },
        ]),
      refusal("not_found", /no-such-entity/),
    );
    assert.equal(startOf(session, 1), 9000);
    assert.throws(
      () =>
        session.entities.updateMany([
          { entityId: "large-marker-1", ops: [{ op: "set", path: ["startMs"], value: 1 }] },
          { entityId: "large-marker-1", ops: [{ op: "set", path: ["startMs"], value: 2 }] },
        ]),
      refusal("invalid_operation", /twice/),
    );
  });
});
