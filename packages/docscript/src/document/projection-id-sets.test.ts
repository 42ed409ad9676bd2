/**
 * The relation ids a projection indexes by endpoint are held as one id, a few in an array, or a set
 * (`IdSet`): against a plain model, in every order of adds and removes, on a projection and on an
 * overlay of it, which leaves its base as it was. A relation set is indexed when the indexes are next
 * read, so reads come at random points between the steps too.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import fc from "fast-check";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { Projection } from "./projection.ts";

/** Endpoints few enough that some hold one relation, some a few, some more than an array holds. */
const endpoints = ["a", "b", "c", "d"];

const step = fc.record({
  relation: fc.integer({ min: 0, max: 30 }),
  ends: fc.option(fc.tuple(fc.constantFrom(...endpoints), fc.constantFrom(...endpoints)), { nil: undefined }),
  /** Read the indexes after this step (against the model so far). */
  read: fc.nat({ max: 3 }).map((n) => n === 0),
});

type Step = { relation: number; ends: [string, string] | undefined; read?: boolean };

/** Relation ids by endpoint, as the steps leave them. */
function model(steps: readonly Step[], start: Map<string, [string, string]> = new Map()) {
  const relations = new Map(start);
  for (const { relation, ends } of steps) {
    if (ends === undefined) relations.delete(`r${relation}`);
    else relations.set(`r${relation}`, ends);
  }
  return relations;
}

/** Applies the steps, reading the indexes where a step says so against the model from `start`. */
function apply(
  projection: Projection,
  steps: readonly Step[],
  start: Map<string, [string, string]> = new Map(),
): void {
  steps.forEach(({ relation, ends, read }, index) => {
    projection.setRelationRow(
      `r${relation}`,
      ends === undefined ? undefined : { kind: "uses", endpoint0: ends[0], endpoint1: ends[1] },
    );
    if (read === true) assertHolds(projection, model(steps.slice(0, index + 1), start));
  });
}

function assertHolds(projection: Projection, relations: Map<string, [string, string]>): void {
  for (const endpoint of endpoints) {
    const expected = [...relations].filter(([, ends]) => ends.includes(endpoint)).map(([id]) => id);
    assert.deepEqual([...projection.relationIdsOf(endpoint)].sort(), expected.sort(), `ids of ${endpoint}`);
    if (expected.length > 0) assert.equal(projection.hasMoreRelations(endpoint, expected.length - 1), true);
    assert.equal(projection.hasMoreRelations(endpoint, expected.length), false);
    assert.deepEqual(
      projection
        .storedRelationsOf(endpoint)
        .map((relation) => relation.relationId)
        .sort(),
      expected.sort(),
    );
  }
}

it("relation ids by endpoint match a plain model on a projection, its overlay and its base", () => {
  fc.assert(
    fc.property(fc.array(step, { maxLength: 60 }), fc.array(step, { maxLength: 60 }), (first, second) => {
      const base = new Projection(timelineSchema);
      apply(base, first as Step[]);
      const before = model(first as Step[]);
      assertHolds(base, before);
      const overlay = base.overlay();
      apply(overlay, second as Step[], before);
      assertHolds(overlay, model(second as Step[], before));
      // The overlay's adds and removes never reach its base.
      assertHolds(base, before);
      const clone = base.clone();
      apply(clone, second as Step[], before);
      assertHolds(clone, model(second as Step[], before));
      assertHolds(base, before);
    }),
    { numRuns: 2000 },
  );
});
