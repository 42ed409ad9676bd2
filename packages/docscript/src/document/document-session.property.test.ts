import assert from "node:assert/strict";
import { it } from "node:test";
import fc from "fast-check";
import { LoroDoc } from "loro-crdt";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { checkDocument, isDeferred, issueKey } from "./check-document.ts";
import { type DocumentSession, openDocument } from "./document-session.ts";
import { run, seededDocument, step } from "./fixtures/random-steps.ts";
import { interpretDocument, projectDocument } from "./interpret.ts";

function view(session: DocumentSession) {
  return {
    entities: session.entities.list().sort((left, right) => (left.entityId < right.entityId ? -1 : 1)),
    relations: session.relations.list(),
    issues: session.check(),
  };
}

it("what a session writes reads back identically after export and import, refused writes change nothing", () => {
  fc.assert(
    fc.property(fc.array(step, { minLength: 5, maxLength: 40 }), (steps) => {
      const doc = new LoroDoc();
      doc.setPeerId(1);
      const session = openDocument(doc, timelineSchema);
      for (const current of steps) run(session, current);
      doc.commit();
      const written = view(session);
      const copy = LoroDoc.fromSnapshot(doc.export({ mode: "snapshot" }));
      assert.deepEqual(interpretDocument(copy, timelineSchema), written);
      assert.deepEqual(view(openDocument(copy, timelineSchema)), written);
    }),
    { numRuns: 60 },
  );
});

it("two replicas editing concurrently converge to the same entities, relations and issues", () => {
  fc.assert(
    fc.property(
      fc.array(step, { minLength: 5, maxLength: 20 }),
      fc.array(step, { maxLength: 12 }),
      fc.array(step, { maxLength: 12 }),
      (shared, left, right) => {
        const base = seededDocument(shared);
        const leftDoc = base.fork();
        leftDoc.setPeerId(2);
        const rightDoc = base.fork();
        rightDoc.setPeerId(3);
        const leftSession = openDocument(leftDoc, timelineSchema);
        const rightSession = openDocument(rightDoc, timelineSchema);
        for (const current of left) run(leftSession, current);
        for (const current of right) run(rightSession, current);
        leftDoc.commit();
        rightDoc.commit();
        leftDoc.import(rightDoc.export({ mode: "update", from: base.oplogVersion() }));
        rightDoc.import(leftDoc.export({ mode: "update", from: base.oplogVersion() }));
        assert.deepEqual(
          interpretDocument(leftDoc, timelineSchema),
          interpretDocument(rightDoc, timelineSchema),
        );
      },
    ),
    { numRuns: 40 },
  );
});

it("the issues a session's writes add all lie within its changed scope, and are all deferred ones (ADR 0451)", () => {
  fc.assert(
    fc.property(
      fc.array(step, { minLength: 5, maxLength: 20 }),
      fc.array(step, { minLength: 1, maxLength: 20 }),
      (shared, plan) => {
        const base = new LoroDoc();
        base.setPeerId(1);
        const seed = openDocument(base, timelineSchema);
        for (const current of shared) run(seed, current);
        base.commit();
        const baseProjection = projectDocument(base, timelineSchema);
        const fork = base.fork();
        fork.setPeerId(2);
        const session = openDocument(fork, timelineSchema, { projection: baseProjection });
        for (const current of plan) run(session, current);
        const added = (
          issues: readonly { constraint: string }[],
          before: readonly { constraint: string }[],
        ) => {
          const known = new Set(before.map((issue) => issueKey(issue as never)));
          return issues.map((issue) => issueKey(issue as never)).filter((key) => !known.has(key));
        };
        const scope = session.changedScope();
        const whole = added(session.check(), seed.check());
        const scoped = added(session.check(scope), checkDocument(baseProjection, scope));
        assert.deepEqual(scoped.sort(), whole.sort());
        // Each write's own (local) check let through only what a script may leave for the plan check.
        const before = new Set(seed.check().map(issueKey));
        const kept = session.check().filter((issue) => !before.has(issueKey(issue)) && !isDeferred(issue));
        assert.deepEqual(kept, []);
      },
    ),
    { numRuns: 60 },
  );
});
