/**
 * An entities lookup with `claims: true` answers, beside its page, every row claiming the entities it
 * found and their variants, and names them `claimed`: the same rows lookups of their ids and variants
 * find, so a listing reads its entities in one request. On SQLite, on PostgreSQL and from a replica's projection; one entity here is
 * claimed by two rows (a track row whose id a clip's embedded marker has too), which a page by kind
 * alone does not bring.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { LoroDoc, LoroMap } from "loro-crdt";
import { projectDocument } from "../src/document/interpret.ts";
import { replicaRowSource } from "../src/document/replica-rows.ts";
import type { DocumentStore } from "../src/server/document-store.ts";
import { rowLookupsOf } from "../src/server/request-input.ts";
import { lookUpRows, type RowLookup, type RowLookupAnswer } from "../src/server/row-reads.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { largeTimeline } from "./large-timeline.ts";
import { createMemberDocument } from "./member-store.ts";
import { describeOnBothStores } from "./on-both-stores.ts";

/** A row claiming an id a clip's embedded marker claims too: a conflict the claims must bring. */
const twice = "large-marker-3";
const variantId = "track-1-variant";

function conflictedSnapshot(): Uint8Array {
  const doc = LoroDoc.fromSnapshot(largeTimeline(120, 10).snapshot);
  const row = doc.getMap("entities").setContainer(twice, new LoroMap());
  row.set("kind", "track");
  row.setContainer("fields", new LoroMap()).set("role", "extra");
  // A variant of the first track: a page cut before it still brings it with its base.
  const variant = doc.getMap("entities").setContainer(variantId, new LoroMap());
  variant.set("kind", "track");
  variant.set("variantOf", "track-1");
  variant.setContainer("fields", new LoroMap()).set("role", "video");
  doc.commit();
  return doc.export({ mode: "snapshot" });
}

const snapshot = conflictedSnapshot();
const projection = projectDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema);

type Result = RowLookupAnswer["results"][number];
const rowKeys = (result: Result | undefined) =>
  (result?.rows ?? []).map((row) => `${row.root}/${row.rowId}`).sort();

/** The claims lookup against a page by kind and a lookup of the ids it found, through `lookUp`. */
async function checkClaims(lookUp: (lookups: readonly RowLookup[]) => Promise<readonly Result[]>) {
  const page: RowLookup = { members: "entity", kinds: ["track"], limit: 100 };
  const [plain, claims] = await lookUp([page, { ...page, claims: true }]);
  assert.ok(plain !== undefined && claims !== undefined);
  assert.equal(plain.claimed, undefined, "no claims unless asked");
  assert.equal(claims.found, plain.found);
  assert.equal(claims.last, plain.last);
  const listed = [...(claims.claimed ?? [])].sort();
  assert.deepEqual(listed, [twice, "large-track-overlay", "track-1", variantId, "track-2", "track-3"]);
  const [byIds, variants] = await lookUp([
    { members: "entity", ids: listed, limit: 100 },
    { members: "entity", variantsOf: listed, limit: 100 },
  ]);
  assert.deepEqual(
    rowKeys(claims),
    [...new Set([...rowKeys(plain), ...rowKeys(byIds), ...rowKeys(variants)])].sort(),
  );
  // The clip whose marker claims the track's id too: brought by the claims, not by the page.
  assert.ok(rowKeys(claims).includes("entities/large-clip-3"));
  assert.ok(!rowKeys(plain).includes("entities/large-clip-3"));
  assert.ok(claims.rows.every((row) => row.json !== undefined));
  // A page cut before the variant brings it with its base, which it names answered whole.
  const [cut] = await lookUp([{ ...page, limit: 3, claims: true }]);
  assert.deepEqual(cut?.claimed, [twice, "large-track-overlay", "track-1"]);
  assert.ok(rowKeys(cut).includes(`entities/${variantId}`));
  // Bare, the rows are named only.
  const [bare] = await lookUp([{ ...page, claims: true, bare: true }]);
  assert.deepEqual(rowKeys(bare), rowKeys(claims));
  assert.ok(bare?.rows.every((row) => !("json" in row)));
}

describeOnBothStores("an entities lookup with its claims", "claims", async (store: DocumentStore) => {
  await createMemberDocument(store, snapshot, projection);
  await checkClaims((lookups) => lookUpRows(store, "doc", lookups));
});

it("a replica's projection answers the claims as a store does", async () => {
  const source = replicaRowSource(projection, "v");
  await checkClaims(async (lookups) => (await source.lookUp(lookups)).results);
});

it("a request asks claims of entities with `claims: true` only", () => {
  const lookup = { members: "entity", kinds: ["track"], limit: 10 };
  assert.deepEqual(rowLookupsOf([{ ...lookup, claims: true }]), [{ ...lookup, claims: true }]);
  assert.deepEqual(rowLookupsOf([{ ...lookup, claims: false }]), [lookup]);
  assert.equal(rowLookupsOf([{ ...lookup, claims: "yes" }]), "claims is true or false");
  assert.equal(
    rowLookupsOf([{ members: "relation", kinds: ["contain"], limit: 10, claims: true }]),
    "claims reads entities",
  );
});
