/**
 * The bulk bindings as a script uses them, on a warm worker: a time window read by `entities.list`
 * with a `range`, and a shift of every clip after a time by `entities.updateMany`, in pages.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { largeTimeline } from "../../test/large-timeline.ts";
import { openDocument } from "../document/document-session.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { createEditScriptPool } from "./create-edit-script-pool.ts";
import { runEditScript } from "./run-edit-script.ts";

const schema = {
  module: new URL("../timeline/timeline-schema.ts", import.meta.url),
  exportName: "timelineSchema",
};

describe("bulk bindings in a script", () => {
  const pool = createEditScriptPool({ size: 1 });
  after(() => pool.close());
  // 1,200 image clips on track-1; clip i's marker starts at 8000 + 1000·i ms.
  const { snapshot } = largeTimeline(1_200);

  it("shifts every clip from 30 s by 2 s in pages of updateMany, as one plan", async () => {
    const replica = LoroDoc.fromSnapshot(snapshot);
    const result = await runEditScript(
      { pool, schema, hooks: {} },
      {
        docId: "bulk",
        replica,
        version: "v",
        script: `let after;
let shifted = 0;
for (;;) {
  const page = entities.list({ entityKind: 'sequence-marker', range: { field: 'startMs', from: 30000 }, limit: 500, after });
  if (page.length === 0) break;
  shifted += entities.updateMany(page.map((m) => ({ entityId: m.entityId, ops: [{ op: 'set', path: ['startMs'], value: m.payload.startMs + 2000 }] })));
  after = page[page.length - 1].entityId;
}
console.log(shifted, entities.list({ entityKind: 'sequence-marker', range: { field: 'startMs', from: 60000, to: 62000 } }).length);`,
      },
    );
    assert.ok(result.ok, JSON.stringify(result));
    // Clips 22..1199 start at or after 30 s: 1,178 of them.
    assert.deepEqual(
      result.logs.map((line) => line.text),
      ["1178 2"],
    );
    assert.equal(result.plan.preview.counts.updated, 1178);
    const copy = replica.fork();
    copy.import(result.plan.update);
    const session = openDocument(copy, timelineSchema);
    assert.equal(session.entities.get("large-marker-21")?.payload.startMs, 29_000);
    assert.equal(session.entities.get("large-marker-22")?.payload.startMs, 32_000);
    assert.equal(session.entities.get("large-marker-1199")?.payload.startMs, 1_209_000);
    assert.deepEqual(session.check(), []);
  });

  it("refuses an updateMany with a wrong update whole, at its line", async () => {
    const replica = LoroDoc.fromSnapshot(snapshot);
    const result = await runEditScript(
      { pool, schema, hooks: {} },
      {
        docId: "bulk",
        replica,
        version: "v",
        script: `try {
  entities.updateMany([
    { entityId: 'large-marker-1', ops: [{ op: 'set', path: ['startMs'], value: 1 }] },
    { entityId: 'large-marker-2', ops: [{ op: 'set', path: ['startMs'], value: -1 }] },
  ]);
} catch (error) {
  console.log(error.code, entities.get('large-marker-1').payload.startMs);
}`,
      },
    );
    assert.ok(result.ok, JSON.stringify(result));
    assert.deepEqual(
      result.logs.map((line) => line.text),
      ["schema_violation 9000"],
    );
    assert.equal(result.plan.preview.writes, 0);
  });
});
