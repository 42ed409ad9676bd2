/**
 * A store answers the relations of many endpoints in one query (`readMembers` with `endpoints`): the
 * same members as one query per endpoint, each once, in pages; on SQLite and PostgreSQL.
 */
import assert from "node:assert/strict";
import { LoroDoc } from "loro-crdt";
import { checkDocument } from "../src/document/check-document.ts";
import { projectDocument } from "../src/document/interpret.ts";
import type { DocumentStore, FoundMember, MemberQuery } from "../src/server/document-store.ts";
import { hashToken } from "../src/server/index.ts";
import { allRowChanges } from "../src/server/row-members.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { largeTimeline } from "./large-timeline.ts";
import { describeOnBothStores } from "./on-both-stores.ts";

const { snapshot } = largeTimeline(120, 10);
const projection = projectDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema);
const key = (member: FoundMember) => `${member.id}@${member.rowId}`;

async function readAll(store: DocumentStore, query: Omit<MemberQuery, "limit" | "after">) {
  const found: FoundMember[] = [];
  let afterId: string | undefined;
  for (;;) {
    const page = await store.readMembers("doc", { ...query, after: afterId, limit: 7 });
    found.push(...page);
    if (page.length < 7) return found;
    afterId = page.at(-1)?.id;
  }
}

async function checkEndpoints(store: DocumentStore) {
  await store.createDocument({
    documentId: "doc",
    tokenHash: hashToken("token-0123456789abcdef"),
    snapshot,
    rows: allRowChanges(projection),
    issues: checkDocument(projection),
  });
  // Clips, their images and markers, the overlay track: one relation may join two of them.
  const ids = ["large-clip-3", "large-image-3", "large-clip-9", "large-marker-9", "large-track-overlay"];
  const one: FoundMember[] = [];
  for (const id of ids)
    one.push(...(await store.readMembers("doc", { type: "relation", endpoint: id, limit: 1000 })));
  const unique = new Map(one.map((member) => [key(member), member]));
  const many = await store.readMembers("doc", { type: "relation", endpoints: ids, limit: 1000 });
  assert.deepEqual(new Set(many.map(key)), new Set(unique.keys()));
  assert.equal(many.length, unique.size, "each relation once");
  // Paged: the same, a page at a time.
  const paged = await readAll(store, { type: "relation", endpoints: ids });
  assert.deepEqual(paged.map(key).sort(), [...unique.keys()].sort());
  const contains = await store.readMembers("doc", {
    type: "relation",
    endpoints: ids,
    kinds: ["contain"],
    limit: 1000,
  });
  assert.ok(contains.length > 0 && contains.every((member) => member.kind === "contain"));
  assert.deepEqual(
    new Set(contains.map(key)),
    new Set(many.filter((member) => member.kind === "contain").map(key)),
  );
}

describeOnBothStores("readMembers by many endpoints", "endpoints", checkEndpoints);
