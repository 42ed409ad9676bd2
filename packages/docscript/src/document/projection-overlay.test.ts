import assert from "node:assert/strict";
import { it } from "node:test";
import fc from "fast-check";
import { LoroDoc } from "loro-crdt";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { checkDocument } from "./check-document.ts";
import { openDocument } from "./document-session.ts";
import { run, seededDocument, step } from "./fixtures/random-steps.ts";
import { projectDocument } from "./interpret.ts";
import { LayeredMap } from "./layered-map.ts";
import type { Projection } from "./projection.ts";

/** Everything a projection answers, in the order it answers it. */
function readOut(projection: Projection) {
  const entityIds = [...projection.entityIds()];
  return {
    entities: [...projection.entities()],
    relationIds: [...projection.relationIds()],
    rows: [...projection.rowIds()],
    relationRows: [...projection.relationRowIds()],
    relationsOf: entityIds.map((entityId) => projection.relationsOf(entityId)),
    identities: entityIds.map((entityId) => {
      const stored = projection.stored(entityId);
      return stored === undefined ? [] : projection.sameIdentity(stored);
    }),
    variants: entityIds.map((entityId) => projection.variantsOf(entityId)),
    count: projection.entityCount,
    issues: checkDocument(projection),
  };
}

it("a layered map iterates, sizes and answers as a Map given the same calls on a copy of its base", () => {
  const operation = fc.oneof(
    fc.record({
      kind: fc.constant("set" as const),
      key: fc.integer({ min: 0, max: 12 }),
      value: fc.integer(),
    }),
    fc.record({ kind: fc.constant("delete" as const), key: fc.integer({ min: 0, max: 12 }) }),
  );
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 0, max: 12 })), fc.array(operation), (baseKeys, operations) => {
      const base = new Map(baseKeys.map((key) => [key, -key] as const));
      const frozen = [...base];
      const copy = new Map(base);
      const layered = new LayeredMap(base);
      for (const operation of operations) {
        if (operation.kind === "set") {
          copy.set(operation.key, operation.value);
          layered.set(operation.key, operation.value);
        } else assert.equal(layered.delete(operation.key), copy.delete(operation.key));
      }
      assert.deepEqual([...layered], [...copy]);
      assert.equal(layered.size, copy.size);
      for (let key = 0; key <= 12; key++) {
        assert.equal(layered.has(key), copy.has(key));
        assert.equal(layered.get(key), copy.get(key));
      }
      assert.deepEqual([...base], frozen);
    }),
    { numRuns: 300 },
  );
});

it("a session over an overlay reads as a fresh read of what it wrote, and leaves the base projection as it was", () => {
  fc.assert(
    fc.property(
      fc.array(step, { minLength: 5, maxLength: 20 }),
      fc.array(step, { minLength: 1, maxLength: 20 }),
      (shared, plan) => {
        const base = seededDocument(shared);
        const baseProjection = projectDocument(base, timelineSchema);
        const before = readOut(baseProjection);
        const fork = base.fork();
        fork.setPeerId(2);
        const session = openDocument(fork, timelineSchema, { projection: baseProjection });
        for (const current of plan) run(session, current);
        fork.commit();
        assert.deepEqual(readOut(baseProjection), before);
        const fresh = openDocument(LoroDoc.fromSnapshot(fork.export({ mode: "snapshot" })), timelineSchema);
        const byId = (entities: { entityId: string }[]) =>
          entities.sort((left, right) => (left.entityId < right.entityId ? -1 : 1));
        assert.deepEqual(byId(session.entities.list()), byId(fresh.entities.list()));
        assert.deepEqual(session.relations.list(), fresh.relations.list());
        assert.deepEqual(session.check(), fresh.check());
      },
    ),
    { numRuns: 60 },
  );
});
