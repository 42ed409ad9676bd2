/**
 * The container index records containers by walking Loro's handles: a plain value shaped like a
 * container read with its id (`{ cid, value }`) is read back as itself, and never places the container
 * it names in the row that holds it.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { LoroDoc, LoroList, LoroMap } from "loro-crdt";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import type { ContainerIndex } from "./container-index.ts";
import { projectDocument, refreshRows } from "./interpret.ts";
import { Projection } from "./projection.ts";

function documentWithLookalike() {
  const doc = new LoroDoc();
  const entities = doc.getMap("entities");
  const other = entities.setContainer("track-2", new LoroMap());
  other.set("kind", "track");
  const otherFields = other.setContainer("fields", new LoroMap());
  otherFields.set("name", "B");
  const row = entities.setContainer("track-1", new LoroMap());
  row.set("kind", "track");
  const fields = row.setContainer("fields", new LoroMap());
  // A plain value naming track-2's fields map, in the shape `getDeepValueWithID` gives a container.
  fields.set("name", { cid: otherFields.id, value: { name: "spoof" } } as never);
  const tags = fields.setContainer("tags", new LoroList());
  const tag = tags.insertContainer(0, new LoroMap());
  tag.set("label", "x");
  doc.commit();
  return { doc, otherFields, fields, tag };
}

test("a plain value shaped like a container with its id is read as itself and places nothing", () => {
  const { doc, otherFields, fields, tag } = documentWithLookalike();
  const index: ContainerIndex = new Map();
  const projection = projectDocument(doc, timelineSchema, index);
  assert.deepEqual(projection.rowJson("track-1"), projectDocument(doc, timelineSchema).rowJson("track-1"));
  assert.deepEqual((projection.rowJson("track-1") as { fields: { name: unknown } }).fields.name, {
    cid: otherFields.id,
    value: { name: "spoof" },
  });
  assert.deepEqual(index.get(otherFields.id), { root: "entities", rowId: "track-2" });
  assert.deepEqual(index.get(fields.id), { root: "entities", rowId: "track-1" });
  // A map inside a list is placed under its row too.
  assert.deepEqual(index.get(tag.id), { root: "entities", rowId: "track-1" });

  const refreshed: ContainerIndex = new Map();
  const again = new Projection(timelineSchema);
  refreshRows(again, doc, { entities: ["track-1", "track-2"], relations: [] }, refreshed);
  assert.deepEqual(again.rowJson("track-1"), projection.rowJson("track-1"));
  assert.deepEqual(refreshed.get(otherFields.id), { root: "entities", rowId: "track-2" });
});
