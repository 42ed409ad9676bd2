/**
 * The large timeline's rows, written out without reading the document (how benches and the 100k
 * budget test store it fast), are the rows a read of the document projects to.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { LoroDoc } from "loro-crdt";
import { checkDocument } from "../src/document/check-document.ts";
import { projectDocument } from "../src/document/interpret.ts";
import type { RowChange } from "../src/server/document-store.ts";
import { allRowChanges } from "../src/server/row-members.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { largeTimeline, largeTimelineRows, overlayTrackId } from "./large-timeline.ts";

const byKey = (rows: readonly RowChange[]) =>
  new Map(rows.map((row) => [`${row.root}/${row.rowId}`, { json: row.json, members: row.members }]));

test("the large timeline's written-out rows equal those its document projects to", () => {
  const built = largeTimeline(1_234);
  const read = allRowChanges(projectDocument(LoroDoc.fromSnapshot(built.snapshot), timelineSchema));
  const written = largeTimelineRows(1_234);
  assert.equal(written.length, read.length);
  assert.ok(read.length > 3 * 1_234);
  assert.deepStrictEqual(byKey(written), byKey(read));
});

test("with an overlay track, its rows equal those its document projects to, and the document is valid", () => {
  const built = largeTimeline(1_234, 10);
  const projection = projectDocument(LoroDoc.fromSnapshot(built.snapshot), timelineSchema);
  const written = largeTimelineRows(1_234, 10);
  assert.deepStrictEqual(byKey(written), byKey(allRowChanges(projection)));
  assert.equal(built.entityCount, projection.entityCount);
  assert.equal(projection.storedRelationsOf(overlayTrackId, "contain").length, 123);
  assert.deepEqual(checkDocument(projection), []);
});
