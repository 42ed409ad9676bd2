/**
 * A write whose mutation of Loro throws part-way lands nothing of it (ADR 0493): the version before it
 * is read off the history after the fact, whether the write began a change of its own (the first
 * write, or one after another peer's update) or Loro merged it into the writer's previous change.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { LoroDoc, LoroMap, LoroText } from "loro-crdt";
import { DocScriptError } from "../schema/docscript-error.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { openDocument } from "./document-session.ts";
import { ENTITIES } from "./layout.ts";
import { createSessionContext } from "./session-context.ts";

/** A mutation that writes a few atoms (a row, a text of 11 characters, a key) and then throws. */
function halfWrite(doc: LoroDoc): () => void {
  return () => {
    const row = doc.getMap(ENTITIES).setContainer("half-written", new LoroMap());
    row.setContainer("text", new LoroText()).insert(0, "hello world");
    doc.getMap(ENTITIES).set("stray", 1);
    throw new Error("the disk went away");
  };
}

const none = () => ({ entities: new Map<string, unknown>(), relations: new Map<string, unknown>() });

/** Where the half write comes: after the session's own writes, or after another peer's update. */
const cases = ["after own writes", "after own committed writes", "after another peer's update", "first"];

for (const after of cases) {
  it(`a mutation that throws part-way leaves nothing (${after})`, () => {
    const doc = new LoroDoc();
    doc.setPeerId(11);
    const session = openDocument(doc, timelineSchema, { role: "host" });
    const track = session.entities.create({ entityKind: "track", payload: { role: "video", name: "Main" } });
    const caption = session.entities.create({ entityKind: "caption", payload: { text: "Hello" } });
    // A session's writes stay pending for a while (ADR 0499): the half write follows them in one transaction.
    if (after === "after own writes") assert.ok(doc.getPendingTxnLength() > 0);
    if (after === "after own committed writes") doc.commit();
    if (after === "after another peer's update") {
      const other = new LoroDoc();
      other.setPeerId(12);
      other.import(doc.export({ mode: "snapshot" }));
      other.getMap(ENTITIES).set("from-another-peer", 2);
      other.commit();
      doc.import(other.export({ mode: "update", from: doc.oplogVersion() }));
    }
    if (after === "first") {
      const fresh = new LoroDoc();
      fresh.setPeerId(13);
      fresh.import(doc.export({ mode: "snapshot" }));
      assertHalfWriteLeavesNothing(fresh);
      return;
    }
    assertHalfWriteLeavesNothing(doc);
    const again = openDocument(doc, timelineSchema);
    assert.equal(again.entities.get(track.entityId)?.entityKind, "track");
    assert.equal(again.entities.get(caption.entityId)?.entityKind, "caption");
  });
}

function assertHalfWriteLeavesNothing(doc: LoroDoc): void {
  const before = JSON.stringify(doc.toJSON());
  const context = createSessionContext(doc, timelineSchema, { role: "host" });
  assert.throws(
    () => context.land(none(), halfWrite(doc)),
    (error: unknown) =>
      DocScriptError.isInstance(error) &&
      error.code === "invalid_operation" &&
      /nothing of it landed: the disk went away/.test(error.message),
  );
  assert.equal(JSON.stringify(doc.toJSON()), before, "the document is as it was before the write");
  // The document goes on: a later write lands, and a fresh replica of it holds the same state.
  openDocument(doc, timelineSchema).entities.create({ entityKind: "caption", payload: { text: "After" } });
  const replica = new LoroDoc();
  replica.import(doc.export({ mode: "snapshot" }));
  assert.deepEqual(replica.toJSON(), doc.toJSON());
  assert.equal(replica.getMap(ENTITIES).get("stray"), undefined);
}
