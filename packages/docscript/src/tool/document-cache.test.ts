import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { LoroDoc } from "loro-crdt";
import { type DocumentSession, openDocument } from "../document/document-session.ts";
import { run, step } from "../document/fixtures/random-steps.ts";
import { interpretDocument } from "../document/interpret.ts";
import { sampleTimelineSnapshot } from "../module/sample-timeline.ts";
import { defineSchema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { type CheckedOutDocument, createDocumentCache } from "./document-cache.ts";

function view(session: DocumentSession) {
  return {
    entities: session.entities.list().sort((left, right) => (left.entityId < right.entityId ? -1 : 1)),
    relations: session.relations.list(),
    issues: session.check(),
  };
}

/** What a fresh, whole read of `doc` shows. */
function freshView(doc: LoroDoc) {
  return interpretDocument(doc, timelineSchema);
}

/** What a run's session over the checked-out document reads. */
function runView(checkedOut: CheckedOutDocument) {
  const { doc, base } = checkedOut.document;
  return view(openDocument(doc, timelineSchema, { projection: base }));
}

/** A run as `runEditScript` makes one: writes on a fresh peer, its plan is the update since the checkout. */
function runPlan(checkedOut: CheckedOutDocument, peer: number, write: (session: DocumentSession) => void) {
  const { doc, base } = checkedOut.document;
  const before = doc.oplogVersion();
  doc.setPeerId(peer);
  write(openDocument(doc, timelineSchema, { projection: base }));
  doc.commit();
  const update = doc.export({ mode: "update", from: before });
  checkedOut.release();
  return update;
}

/** Another client's commit: a fork of the replica on its own peer, merged back. */
function otherClient(replica: LoroDoc, peer: number, edit: (session: DocumentSession) => void): void {
  const fork = replica.fork();
  fork.setPeerId(peer);
  edit(openDocument(fork, timelineSchema, { role: "host" }));
  fork.commit();
  replica.import(fork.export({ mode: "update", from: replica.oplogVersion() }));
}

/** The replica with `update` applied, as the server would apply a plan: it must need nothing else. */
function applied(replica: LoroDoc, update: Uint8Array): LoroDoc {
  const copy = replica.fork();
  const status = copy.import(update);
  assert.equal(status.pending ?? null, null, "the plan depends on ops the replica does not have");
  return copy;
}

const volumeOf = (doc: LoroDoc, entityId: string) =>
  freshView(doc).entities.find((entity) => entity.entityId === entityId)?.payload.volume;

describe("the host's run documents (ADR 0464): versions and catching up", () => {
  it("keep a version: each run's plan depends on that version alone, and no run's writes reach the next run", () => {
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const cache = createDocumentCache();
    const first = cache.checkout("doc", replica, timelineSchema, { documents: 4 });
    assert.equal(first.document.source, "snapshot");
    const before = runView(first);
    const clip = before.entities.find((entity) => entity.entityKind === "clip")!;
    const firstPlan = runPlan(first, 501, (session) => {
      session.entities.update(clip.entityId, [{ op: "set", path: ["volume"], value: -30 }]);
      session.entities.create({ entityKind: "track", payload: { role: "overlay" } });
      assert.throws(
        () => session.entities.update(clip.entityId, [{ op: "set", path: ["volume"], value: "loud" }]),
        (error: unknown) => DocScriptError.isInstance(error) && error.code === "schema_violation",
      );
    });

    const second = cache.checkout("doc", replica, timelineSchema, { documents: 4 });
    assert.equal(second.document.source, "cached");
    assert.equal(second.document.doc, first.document.doc, "the run doc is kept, not forked per run");
    assert.deepEqual(runView(second), before);
    assert.deepEqual(freshView(second.document.doc), freshView(replica));
    const secondPlan = runPlan(second, 502, (session) => {
      session.entities.update(clip.entityId, [{ op: "set", path: ["volume"], value: -7 }]);
    });
    // Each plan applies to the replica by itself: the second does not depend on the first's ops.
    assert.equal(volumeOf(applied(replica, firstPlan), clip.entityId), -30);
    assert.equal(volumeOf(applied(replica, secondPlan), clip.entityId), -7);
    assert.equal(freshView(applied(replica, secondPlan)).entities.length, before.entities.length);
  });

  it("after another client's commit, catch up by the updates since and read what they changed", () => {
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const cache = createDocumentCache();
    runPlan(cache.checkout("doc", replica, timelineSchema, { documents: 4 }), 503, (session) => {
      session.entities.create({ entityKind: "track", payload: { role: "bgm", name: "Never published" } });
    });
    otherClient(replica, 41, (session) => {
      const [clip, other] = session.entities.list({ entityKind: "clip" });
      session.entities.update(clip!.entityId, [{ op: "set", path: ["volume"], value: -12 }]);
      session.entities.delete(other!.entityId);
      session.entities.create({ entityKind: "track", payload: { role: "overlay", name: "From elsewhere" } });
    });
    const next = cache.checkout("doc", replica, timelineSchema, { documents: 4 });
    assert.equal(next.document.source, "updated");
    const read = runView(next);
    assert.deepEqual(read, freshView(replica));
    assert.ok(read.entities.some((entity) => entity.payload.name === "From elsewhere"));
    assert.ok(read.entities.every((entity) => entity.payload.name !== "Never published"));
    assert.deepEqual(freshView(next.document.doc), freshView(replica));
  });

  it("read the document whole when the replica does not hold the kept version, or for another schema", () => {
    const cache = createDocumentCache();
    cache
      .checkout("doc", LoroDoc.fromSnapshot(sampleTimelineSnapshot()), timelineSchema, { documents: 4 })
      .release();
    // Another document under the same id (say, recreated): nothing kept can be caught up from it.
    const recreated = new LoroDoc();
    recreated.setPeerId(7);
    openDocument(recreated, timelineSchema).entities.create({
      entityKind: "track",
      payload: { role: "bgm" },
    });
    recreated.commit();
    const read = cache.checkout("doc", recreated, timelineSchema, { documents: 4 });
    assert.equal(read.document.source, "snapshot");
    assert.deepEqual(runView(read), freshView(recreated));
    read.release();
    const other = defineSchema({ name: "other", entities: { track: { fields: {} } }, relations: {} });
    const again = cache.checkout("doc", recreated, other, { documents: 4 });
    assert.equal(again.document.source, "snapshot");
    assert.equal(again.document.base.schema, other);
  });
});

describe("the host's run documents (ADR 0464): sharing, limits and any edits", () => {
  it("give a run of their own to a run that starts while another is using the kept document", () => {
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const cache = createDocumentCache();
    const using = cache.checkout("doc", replica, timelineSchema, { documents: 4 });
    const meanwhile = cache.checkout("doc", replica, timelineSchema, { documents: 4 });
    assert.notEqual(meanwhile.document.doc, using.document.doc);
    assert.deepEqual(runView(meanwhile), runView(using));
    meanwhile.release();
    using.release();
    const after = cache.checkout("doc", replica, timelineSchema, { documents: 4 });
    assert.equal(after.document.source, "cached");
    assert.equal(after.document.doc, using.document.doc);
  });

  it("keep at most `limit` documents, the least recently used leaving first; 0 keeps none", () => {
    const cache = createDocumentCache();
    const replicas = ["a", "b", "c"].map(() => LoroDoc.fromSnapshot(sampleTimelineSnapshot()));
    const source = (index: number, documents: number) => {
      const checkedOut = cache.checkout(`doc-${index}`, replicas[index]!, timelineSchema, { documents });
      checkedOut.release();
      return checkedOut.document.source;
    };
    for (const index of [0, 1, 2]) source(index, 2);
    assert.equal(cache.size, 2);
    assert.equal(source(2, 2), "cached");
    assert.equal(source(0, 2), "snapshot");
    source(1, 0);
    assert.equal(cache.size, 0);
    assert.equal(source(1, 0), "snapshot");
  });

  it("keep no more entities than a budget: a document above it is read each time, and evicts older ones", () => {
    const cache = createDocumentCache();
    const small = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const large = LoroDoc.fromSnapshot(sampleTimelineSnapshot({ extraClips: 10 }));
    const source = (key: string, replica: LoroDoc, limits: { documents: number; entities: number }) => {
      const checkedOut = cache.checkout(key, replica, timelineSchema, limits);
      checkedOut.release();
      return checkedOut.document.source;
    };
    const limits = { documents: 4, entities: 30 };
    source("small", small, limits);
    assert.equal(cache.size, 1);
    // 12 + 30 entities: over the budget alone, so never kept; the small one stays.
    source("large", large, limits);
    assert.equal(source("large", large, limits), "snapshot");
    assert.equal(source("small", small, limits), "cached");
    // With room for the large one only, keeping it evicts the small one.
    const roomy = { documents: 4, entities: 45 };
    source("large", large, roomy);
    assert.equal(cache.size, 1);
    assert.equal(source("large", large, roomy), "cached");
  });

  it("after any runs and concurrent edits, a caught-up document reads exactly as a fresh read, and its plan applies alone", () => {
    fc.assert(
      fc.property(
        fc.array(step, { minLength: 5, maxLength: 20 }),
        fc.array(step, { maxLength: 12 }),
        fc.array(step, { maxLength: 12 }),
        fc.array(step, { maxLength: 8 }),
        (shared, left, right, plan) => {
          const replica = new LoroDoc();
          replica.setPeerId(1);
          const seed = openDocument(replica, timelineSchema);
          for (const current of shared) run(seed, current);
          replica.commit();
          const cache = createDocumentCache();
          runPlan(cache.checkout("doc", replica, timelineSchema, { documents: 4 }), 9, (session) => {
            for (const current of plan) run(session, current);
          });
          const base = replica.oplogVersion();
          const forks = [left, right].map((steps, index) => {
            const fork = replica.fork();
            fork.setPeerId(2 + index);
            const session = openDocument(fork, timelineSchema);
            for (const current of steps) run(session, current);
            fork.commit();
            return fork;
          });
          for (const fork of forks) replica.import(fork.export({ mode: "update", from: base }));
          const next = cache.checkout("doc", replica, timelineSchema, { documents: 4 });
          assert.deepEqual(runView(next), freshView(replica));
          const written = { value: undefined as ReturnType<typeof view> | undefined };
          const update = runPlan(next, 10, (session) => {
            for (const current of plan) run(session, current);
            written.value = view(session);
          });
          assert.deepEqual(freshView(applied(replica, update)), written.value);
        },
      ),
      { numRuns: 40 },
    );
  });
});
