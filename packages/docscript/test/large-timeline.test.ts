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
import { mapsOfRows } from "../src/server/row-containers.ts";
import { allRowChanges } from "../src/server/row-members.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { largeTimeline, largeTimelineRows, overlayTrackId } from "./large-timeline.ts";

const byKey = (rows: readonly RowChange[]) =>
  new Map(
    rows.map((row) => [
      `${row.root}/${row.rowId}`,
      { json: row.json, members: row.members, containers: row.containers },
    ]),
  );
/** A read of the document's rows with their maps (ADR 0514). */
const readRows = (snapshot: Uint8Array) => {
  const doc = LoroDoc.fromSnapshot(snapshot);
  return allRowChanges(projectDocument(doc, timelineSchema), mapsOfRows(doc));
};

test("the large timeline's written-out rows and maps equal those its document projects to", () => {
  const built = largeTimeline(1_234);
  const read = readRows(built.snapshot);
  const written = largeTimelineRows(1_234);
  assert.equal(written.length, read.length);
  assert.ok(read.length > 3 * 1_234);
  assert.deepStrictEqual(byKey(written), byKey(read));
});

test("with an overlay track and two chunks, its rows equal those its document projects to, and it is valid", () => {
  const built = largeTimeline(10_234, 10);
  const projection = projectDocument(LoroDoc.fromSnapshot(built.snapshot), timelineSchema);
  const written = largeTimelineRows(10_234, 10);
  assert.deepStrictEqual(byKey(written), byKey(readRows(built.snapshot)));
  assert.equal(built.entityCount, projection.entityCount);
  assert.equal(projection.storedRelationsOf(overlayTrackId, "contain").length, 1_023);
  assert.deepEqual(checkDocument(projection), []);
});
