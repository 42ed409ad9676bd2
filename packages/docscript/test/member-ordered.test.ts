/**
 * A store answers a holder's ordered relations of a kind from their first or their last (`readMembers`
 * with `ordered`, migration 10's index of positions): the same relations, in the same order, as a
 * projection holding every row sorts them (position, then id); on SQLite and PostgreSQL, with equal
 * positions, a relation row without a position and one whose position is not text among them.
 */
import assert from "node:assert/strict";
import { LoroDoc, LoroMap } from "loro-crdt";
import { projectDocument } from "../src/document/interpret.ts";
import type { DocumentStore } from "../src/server/document-store.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { largeTimeline, overlayTrackId } from "./large-timeline.ts";
import { createMemberDocument } from "./member-store.ts";
import { describeOnBothStores } from "./on-both-stores.ts";

/** The large timeline, plus overlay relations with a duplicate position, none, and a number. */
function seeded() {
  const doc = LoroDoc.fromSnapshot(largeTimeline(120, 10).snapshot);
  const relations = doc.getMap("relations");
  const extra = (id: string, clipId: string, position: unknown) => {
    const row = relations.setContainer(id, new LoroMap());
    row.set("kind", "contain");
    row.set("endpoint0", overlayTrackId);
    row.set("endpoint1", clipId);
    if (position !== undefined) row.set("position", position);
  };
  const [first] = projectDocument(doc, timelineSchema)
    .orderedRelations("contain", overlayTrackId, "first", 1)
    .map((relation) => relation.position);
  extra("contain-equal", "large-clip-0", first);
  extra("contain-none", "large-clip-1", undefined);
  extra("contain-number", "large-clip-2", 7);
  doc.commit();
  return { snapshot: doc.export({ mode: "snapshot" }), projection: projectDocument(doc, timelineSchema) };
}

const { snapshot, projection } = seeded();

async function checkOrdered(store: DocumentStore) {
  await createMemberDocument(store, snapshot, projection);
  for (const holder of [overlayTrackId, "track-1", "large-clip-3", "no-such-track"])
    for (const from of ["first", "last"] as const)
      for (const limit of [1, 3, 1000]) {
        const found = await store.readMembers("doc", {
          type: "relation",
          ordered: { holder, kind: "contain", from },
          limit,
        });
        const expected = projection.orderedRelations("contain", holder, from, limit);
        assert.deepEqual(
          found.map((member) => member.id),
          expected.map((relation) => relation.relationId),
          `${holder} from ${from}, ${limit}`,
        );
        for (const member of found) {
          assert.equal(member.root, "relations");
          assert.equal((member.json as { endpoint0: string }).endpoint0, holder);
        }
      }
  const all = await store.readMembers("doc", {
    type: "relation",
    ordered: { holder: overlayTrackId, kind: "contain", from: "first" },
    limit: 1000,
  });
  assert.equal(all.length, 15, "twelve overlay clips and three more");
  assert.deepEqual(
    all.slice(0, 2).map((member) => member.id),
    ["contain-none", "contain-number"],
    "no text position sorts as the empty key, by id",
  );
}

describeOnBothStores("readMembers of a holder's ordered relations", "ordered", checkOrdered);
