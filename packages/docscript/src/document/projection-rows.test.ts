import assert from "node:assert/strict";
import { it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { projectDocument } from "./interpret.ts";
import { slotRelationId } from "./layout.ts";

const clipRow = (startMs: number, contentId: string) => ({
  kind: "clip",
  fields: { name: null, volume: 0, speed: 1 },
  slots: {
    content: contentId,
    marker: {
      id: "marker-1",
      kind: "sequence-marker",
      fields: { startMs, durationMs: 1500, trimStartMs: 0 },
    },
  },
});

it("a row written in its fields alone keeps its slot relations; a changed slot re-indexes them", () => {
  for (const overlay of [false, true]) {
    const whole = projectDocument(new LoroDoc(), timelineSchema);
    whole.setRow("clip-1", clipRow(0, "image-1"));
    const projection = overlay ? whole.overlay() : whole;
    const marker = slotRelationId("clip-1", "marker");
    const content = slotRelationId("clip-1", "content");
    const before = projection.storedRelation(marker);
    projection.setRow("clip-1", clipRow(2000, "image-1"));
    assert.equal(projection.storedRelation(marker), before);
    assert.equal((projection.stored("marker-1")?.own as { startMs?: number } | undefined)?.startMs, 2000);
    projection.setRow("clip-1", clipRow(2000, "image-2"));
    assert.equal(projection.storedRelation(content)?.endpoint1EntityId, "image-2");
    assert.deepEqual(
      projection.relationsOf("image-1").map((relation) => relation.relationId),
      [],
    );
    assert.deepEqual(
      projection.relationsOf("image-2").map((relation) => relation.relationId),
      [content],
    );
    projection.setRow("clip-1", undefined);
    assert.equal(projection.storedRelation(marker), undefined);
    assert.deepEqual(projection.relationsOf("image-2"), []);
  }
});
