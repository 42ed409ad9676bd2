/**
 * What a call on a few entities reads along (their relations and variants): a page each, or (a walk's
 * chunk read ahead) one lookup per kind for all of them, within a page a server answers, completing
 * each entity only when not full.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { rowLookupLimits } from "../server/row-reads.ts";
import { KnownLookups, keyOf } from "./demand-keys.ts";
import { idsPerLookup, membersPerPage, speculativeLimit, speculativeLookups } from "./lookup-batches.ts";

const answer = (found: number) => ({ rows: [], found });
const ids = (count: number) => Array.from({ length: count }, (_, index) => `clip-${index}`);

it("one entity: a page of its relations and one of its variants; a full page tells how many it has at least", () => {
  const state = { known: new KnownLookups(), touching: new Map<string, number>() };
  const [relations, variants] = speculativeLookups(state, ["track"], new Set());
  assert.deepEqual(relations?.lookup, { members: "relation", endpoint: "track", limit: speculativeLimit });
  assert.deepEqual(variants?.lookup, { members: "entity", variantOf: "track", limit: speculativeLimit });
  relations?.done(answer(speculativeLimit));
  variants?.done(answer(0));
  assert.equal(state.known.has(keyOf("endpoint", "track")), false, "a full page is not all of them");
  assert.equal(state.touching.get("track"), speculativeLimit);
  assert.equal(state.known.has(keyOf("variants", "track")), true);
});

it("several entities read together: one lookup per kind, each completed only when the answer is not full", () => {
  const state = { known: new KnownLookups(), touching: new Map<string, number>() };
  assert.equal(speculativeLookups(state, ids(3), new Set()).length, 6, "a call's own fill: a page each");
  const lookups = speculativeLookups(state, ids(32), new Set(), true);
  assert.equal(lookups.length, 2);
  const [relations, variants] = lookups;
  assert.deepEqual(relations?.lookup, {
    members: "relation",
    endpoints: ids(32),
    limit: 32 * speculativeLimit,
  });
  assert.deepEqual(variants?.lookup, {
    members: "entity",
    variantsOf: ids(32),
    limit: 32 * speculativeLimit,
  });
  relations?.done(answer(32 * speculativeLimit));
  variants?.done(answer(12));
  for (const id of ids(32)) {
    assert.equal(state.known.has(keyOf("endpoint", id)), false, `${id}: a full answer completes none`);
    assert.equal(state.known.has(keyOf("variants", id)), true, id);
  }
  assert.equal(state.touching.size, 0, "a full answer over several says nothing of one of them");
});

it("never asks past a page the server answers, and leaves out what is known or asked already", () => {
  const state = { known: new KnownLookups(), touching: new Map<string, number>() };
  state.known.add(keyOf("endpoint", "clip-0"));
  const [relations, variants] = speculativeLookups(
    state,
    ids(128),
    new Set([keyOf("variants", "clip-1")]),
    true,
  );
  assert.equal((relations!.lookup as { limit: number }).limit, membersPerPage);
  assert.ok(membersPerPage <= rowLookupLimits.members, "a larger limit is refused by the server");
  assert.deepEqual((relations!.lookup as unknown as { endpoints: string[] }).endpoints, ids(128).slice(1));
  assert.equal(
    (variants!.lookup as unknown as { variantsOf: string[] }).variantsOf.includes("clip-1"),
    false,
  );
  relations?.done(answer(membersPerPage - 1));
  assert.equal(state.known.has(keyOf("endpoint", "clip-127")), true, "fewer than asked: all of them");
  assert.deepEqual(speculativeLookups(state, ["clip-0"], new Set([keyOf("variants", "clip-0")]), true), []);
});

it("more entities than a lookup may name are asked in lookups of `idsPerLookup`", () => {
  const state = { known: new KnownLookups(), touching: new Map<string, number>() };
  const lookups = speculativeLookups(state, ids(idsPerLookup + 100), new Set(), true);
  const named = lookups.map((entry) => {
    const lookup = entry.lookup as unknown as { endpoints?: string[]; variantsOf?: string[] };
    return (lookup.endpoints ?? lookup.variantsOf ?? []).length;
  });
  assert.deepEqual(named, [idsPerLookup, 100, idsPerLookup, 100]);
});
