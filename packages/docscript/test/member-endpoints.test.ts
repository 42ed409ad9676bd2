/**
 * A store answers the relations of many endpoints in one query (`readMembers` with `endpoints`): the
 * same members as one query per endpoint, each once, in pages; on SQLite and PostgreSQL.
 */
import assert from "node:assert/strict";
import { LoroDoc } from "loro-crdt";
import { projectDocument } from "../src/document/interpret.ts";
import type { DocumentStore, FoundMember } from "../src/server/document-store.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { largeTimeline } from "./large-timeline.ts";
import { createMemberDocument, memberKey, readAllMembers } from "./member-store.ts";
import { describeOnBothStores } from "./on-both-stores.ts";

const { snapshot } = largeTimeline(120, 10);
const projection = projectDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema);

async function checkEndpoints(store: DocumentStore) {
  await createMemberDocument(store, snapshot, projection);
  // Clips, their images and markers, the overlay track: one relation may join two of them.
  const ids = ["large-clip-3", "large-image-3", "large-clip-9", "large-marker-9", "large-track-overlay"];
  const one: FoundMember[] = [];
  for (const id of ids)
    one.push(...(await store.readMembers("doc", { type: "relation", endpoint: id, limit: 1000 })));
  const unique = new Map(one.map((member) => [memberKey(member), member]));
  const many = await store.readMembers("doc", { type: "relation", endpoints: ids, limit: 1000 });
  assert.deepEqual(new Set(many.map(memberKey)), new Set(unique.keys()));
  assert.equal(many.length, unique.size, "each relation once");
  // Paged: the same, a page at a time.
  const paged = await readAllMembers(store, { type: "relation", endpoints: ids });
  assert.deepEqual(paged.map(memberKey).sort(), [...unique.keys()].sort());
  const contains = await store.readMembers("doc", {
    type: "relation",
    endpoints: ids,
    kinds: ["contain"],
    limit: 1000,
  });
  assert.ok(contains.length > 0 && contains.every((member) => member.kind === "contain"));
  assert.deepEqual(
    new Set(contains.map(memberKey)),
    new Set(many.filter((member) => member.kind === "contain").map(memberKey)),
  );
}

describeOnBothStores("readMembers by many endpoints", "endpoints", checkEndpoints);
