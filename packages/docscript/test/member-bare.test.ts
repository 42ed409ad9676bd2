/**
 * A bare members lookup (`bare: true`) names the rows its members live in without sending them: the
 * same members, rows, `found` and `last` as the full lookup, no row's JSON; on SQLite and PostgreSQL.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { projectDocument } from "../src/document/interpret.ts";
import type { DocumentStore } from "../src/server/document-store.ts";
import { rowLookupsOf } from "../src/server/request-input.ts";
import { lookUpRows, type RowLookup } from "../src/server/row-reads.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { largeTimeline } from "./large-timeline.ts";
import { createMemberDocument } from "./member-store.ts";
import { describeOnBothStores } from "./on-both-stores.ts";

const { snapshot } = largeTimeline(120, 10);
const projection = projectDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema);

async function checkBare(store: DocumentStore) {
  await createMemberDocument(store, snapshot, projection);
  // Clips (top-level rows), markers (in their clips' rows), a track and an id nothing claims.
  const entityIds = ["large-clip-3", "large-marker-3", "large-marker-9", "track-1", "no-such-entity"];
  const relationIds = [...projection.relationIds()].slice(0, 12);
  const lookups: RowLookup[] = [
    { members: "entity", ids: entityIds, limit: 100 },
    { members: "relation", ids: relationIds, limit: 100 },
    // A page cut short: `last` says where the next starts, bare or not.
    { members: "entity", ids: entityIds, limit: 2 },
  ];
  const full = await lookUpRows(store, "doc", lookups);
  const bare = await lookUpRows(
    store,
    "doc",
    lookups.map((lookup) => ({ ...lookup, bare: true })),
  );
  assert.equal(bare.length, full.length);
  full.forEach((answer, index) => {
    const named = bare[index];
    assert.ok(named !== undefined);
    assert.ok(answer.rows.length > 0 && answer.rows.every((row) => row.json !== undefined));
    assert.deepEqual(
      named.rows,
      answer.rows.map((row) => ({ root: row.root, rowId: row.rowId })),
      "the same rows, named only",
    );
    assert.ok(
      named.rows.every((row) => !("json" in row)),
      "no row's JSON",
    );
    assert.equal(named.found, answer.found);
    assert.equal(named.last, answer.last);
  });
  // The markers live in their clips' rows.
  assert.ok(bare[0]?.rows.some((row) => row.rowId === "large-clip-9"));
  // The store itself reads no row for a bare query as a listing's claims ask it (by ids, alone or with
  // other filters).
  for (const query of [
    { type: "entity" as const, ids: entityIds, limit: 100 },
    { type: "entity" as const, ids: entityIds, kinds: ["sequence-marker"], limit: 100 },
    { type: "relation" as const, ids: relationIds, kinds: ["contain"], limit: 100 },
    // No ids: the store's general member query (a listing's variants are asked so).
    { type: "entity" as const, kinds: ["clip", "sequence-marker"], limit: 20 },
  ]) {
    const members = await store.readMembers("doc", { ...query, bare: true });
    const rows = await store.readMembers("doc", query);
    assert.ok(members.length > 0);
    assert.deepEqual(
      members,
      rows.map((member) => ({ ...member, json: undefined })),
      "the same members, no row's JSON",
    );
  }
}

describeOnBothStores("a bare members lookup", "bare", checkBare);

it("a request asks bare with `bare: true` only", () => {
  const lookup = { members: "entity", ids: ["clip-1"], limit: 10 };
  assert.deepEqual(rowLookupsOf([{ ...lookup, bare: true }]), [{ ...lookup, bare: true }]);
  assert.deepEqual(rowLookupsOf([{ ...lookup, bare: false }]), [lookup]);
  assert.equal(rowLookupsOf([{ ...lookup, bare: "yes" }]), "bare is true or false");
});
