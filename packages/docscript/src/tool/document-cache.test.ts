import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { LoroDoc, VersionVector } from "loro-crdt";
import { type DocumentSession, openDocument } from "../document/document-session.ts";
import { run, step } from "../document/fixtures/random-steps.ts";
import { interpretDocument } from "../document/interpret.ts";
import { sampleTimelineSnapshot } from "../module/sample-timeline.ts";
import { defineSchema } from "../schema/define-schema.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import {
  createDocumentCache,
  type DocumentBytes,
  documentVersion,
  holdsVersion,
  type LoadDocument,
} from "./document-cache.ts";

/** A host replica answering the worker's `document` call the way `runEditScript` does, counting calls. */
function hostOf(replica: LoroDoc) {
  const calls: ("updates" | "snapshot")[] = [];
  const load: LoadDocument = async (since) => {
    const answer: DocumentBytes =
      since !== undefined && holdsVersion(replica, since)
        ? { kind: "updates", bytes: replica.export({ mode: "update", from: VersionVector.decode(since) }) }
        : { kind: "snapshot", bytes: replica.export({ mode: "snapshot" }) };
    calls.push(answer.kind);
    return answer;
  };
  return { load, calls, version: () => documentVersion(replica) };
}

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

/** Another client's commit: a fork of the replica on its own peer, merged back. */
function otherClient(replica: LoroDoc, peer: number, edit: (session: DocumentSession) => void): void {
  const fork = replica.fork();
  fork.setPeerId(peer);
  edit(openDocument(fork, timelineSchema, { role: "host" }));
  fork.commit();
  replica.import(fork.export({ mode: "update", from: replica.oplogVersion() }));
}

describe("a worker's document cache", () => {
  it("serves a version it holds without asking the host; a run's writes and refused writes never reach it", async () => {
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const host = hostOf(replica);
    const cache = createDocumentCache();
    const first = await cache.checkout("doc", host.version(), timelineSchema, { documents: 4 }, host.load);
    assert.equal(first.source, "snapshot");
    const before = view(openDocument(first.doc, timelineSchema, { projection: first.base }));

    // A run writes, has a write refused, and ends without its plan being published.
    const session = openDocument(first.doc, timelineSchema, { projection: first.base });
    const clip = session.entities.list({ entityKind: "clip" })[0]!;
    session.entities.update(clip.entityId, [{ op: "set", path: ["volume"], value: -30 }]);
    session.entities.create({ entityKind: "track", payload: { role: "overlay" } });
    assert.throws(
      () => session.entities.update(clip.entityId, [{ op: "set", path: ["volume"], value: "loud" }]),
      (error: unknown) => DocScriptError.isInstance(error) && error.code === "schema_violation",
    );
    first.doc.commit();

    const second = await cache.checkout("doc", host.version(), timelineSchema, { documents: 4 }, host.load);
    assert.equal(second.source, "cached");
    assert.deepEqual(host.calls, ["snapshot"], "a cached version asks the host for nothing");
    assert.notEqual(second.doc, first.doc, "each run gets its own fork");
    assert.deepEqual(view(openDocument(second.doc, timelineSchema, { projection: second.base })), before);
    assert.deepEqual(freshView(second.doc), freshView(replica));
  });

  it("after another client's commit, asks only for the updates since its version and reads what they changed", async () => {
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const host = hostOf(replica);
    const cache = createDocumentCache();
    await cache.checkout("doc", host.version(), timelineSchema, { documents: 4 }, host.load);
    otherClient(replica, 41, (session) => {
      const [clip, other] = session.entities.list({ entityKind: "clip" });
      session.entities.update(clip!.entityId, [{ op: "set", path: ["volume"], value: -12 }]);
      session.entities.delete(other!.entityId);
      session.entities.create({ entityKind: "track", payload: { role: "overlay", name: "From elsewhere" } });
    });
    const next = await cache.checkout("doc", host.version(), timelineSchema, { documents: 4 }, host.load);
    assert.equal(next.source, "updated");
    assert.deepEqual(host.calls, ["snapshot", "updates"]);
    const read = view(openDocument(next.doc, timelineSchema, { projection: next.base }));
    assert.deepEqual(read, freshView(replica));
    assert.ok(read.entities.some((entity) => entity.payload.name === "From elsewhere"));
    assert.ok(read.entities.some((entity) => entity.payload.volume === -12));
  });

  it("reads a snapshot when the host does not hold its version, and when asked at a version it cannot reach", async () => {
    const cache = createDocumentCache();
    const first = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const firstHost = hostOf(first);
    await cache.checkout("doc", firstHost.version(), timelineSchema, { documents: 4 }, firstHost.load);
    // Another document under the same id (say, recreated): the host cannot send updates from our version.
    const recreated = new LoroDoc();
    recreated.setPeerId(7);
    openDocument(recreated, timelineSchema).entities.create({
      entityKind: "track",
      payload: { role: "bgm" },
    });
    recreated.commit();
    const recreatedHost = hostOf(recreated);
    const read = await cache.checkout(
      "doc",
      recreatedHost.version(),
      timelineSchema,
      { documents: 4 },
      recreatedHost.load,
    );
    assert.equal(read.source, "snapshot");
    assert.deepEqual(freshView(read.doc), freshView(recreated));
    // A host that answers at some other version is refused rather than served.
    await assert.rejects(
      cache.checkout("other", documentVersion(first), timelineSchema, { documents: 4 }, recreatedHost.load),
      (error: unknown) => DocScriptError.isInstance(error) && error.code === "document_unavailable",
    );
  });

  it("keeps at most `limit` documents, the least recently used leaving first; 0 keeps none", async () => {
    const cache = createDocumentCache();
    const hosts = ["a", "b", "c"].map(() => hostOf(LoroDoc.fromSnapshot(sampleTimelineSnapshot())));
    for (const [index, host] of hosts.entries())
      await cache.checkout(`doc-${index}`, host.version(), timelineSchema, { documents: 2 }, host.load);
    assert.equal(cache.size, 2);
    assert.equal(
      (await cache.checkout("doc-2", hosts[2]!.version(), timelineSchema, { documents: 2 }, hosts[2]!.load))
        .source,
      "cached",
    );
    assert.equal(
      (await cache.checkout("doc-0", hosts[0]!.version(), timelineSchema, { documents: 2 }, hosts[0]!.load))
        .source,
      "snapshot",
    );
    await cache.checkout("doc-1", hosts[1]!.version(), timelineSchema, { documents: 0 }, hosts[1]!.load);
    assert.equal(cache.size, 0);
    assert.equal(
      (await cache.checkout("doc-1", hosts[1]!.version(), timelineSchema, { documents: 0 }, hosts[1]!.load))
        .source,
      "snapshot",
    );
  });

  it("keeps no more entities than its budget: a document above it is read each time, and evicts older ones", async () => {
    const cache = createDocumentCache();
    const small = hostOf(LoroDoc.fromSnapshot(sampleTimelineSnapshot()));
    const large = hostOf(LoroDoc.fromSnapshot(sampleTimelineSnapshot({ extraClips: 10 })));
    const limits = { documents: 4, entities: 30 };
    await cache.checkout("small", small.version(), timelineSchema, limits, small.load);
    assert.equal(cache.size, 1);
    // 12 + 30 entities: over the budget alone, so never kept; the small one stays.
    await cache.checkout("large", large.version(), timelineSchema, limits, large.load);
    assert.equal(
      (await cache.checkout("large", large.version(), timelineSchema, limits, large.load)).source,
      "snapshot",
    );
    assert.equal(
      (await cache.checkout("small", small.version(), timelineSchema, limits, small.load)).source,
      "cached",
    );
    // With room for the large one only, keeping it evicts the small one.
    const roomy = { documents: 4, entities: 45 };
    await cache.checkout("large", large.version(), timelineSchema, roomy, large.load);
    assert.equal(cache.size, 1);
    assert.equal(
      (await cache.checkout("large", large.version(), timelineSchema, roomy, large.load)).source,
      "cached",
    );
  });

  it("updates that do not apply drop the kept entry and read a snapshot, with a warning", async () => {
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const host = hostOf(replica);
    const cache = createDocumentCache();
    await cache.checkout("doc", host.version(), timelineSchema, { documents: 4 }, host.load);
    otherClient(replica, 43, (session) => {
      session.entities.create({ entityKind: "track", payload: { role: "overlay" } });
    });
    const garbled: LoadDocument = async (since) =>
      since === undefined ? host.load(since) : { kind: "updates", bytes: new Uint8Array([1, 2, 3]) };
    const read = await cache.checkout("doc", host.version(), timelineSchema, { documents: 4 }, garbled);
    assert.equal(read.source, "snapshot");
    assert.equal(read.warnings?.length, 1);
    assert.deepEqual(freshView(read.doc), freshView(replica));
    assert.equal(
      (await cache.checkout("doc", host.version(), timelineSchema, { documents: 4 }, host.load)).source,
      "cached",
    );
  });

  it("reads the document again for another schema", async () => {
    const replica = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
    const host = hostOf(replica);
    const cache = createDocumentCache();
    await cache.checkout("doc", host.version(), timelineSchema, { documents: 4 }, host.load);
    const other = defineSchema({ name: "other", entities: { track: { fields: {} } }, relations: {} });
    const read = await cache.checkout("doc", host.version(), other, { documents: 4 }, host.load);
    assert.equal(read.source, "snapshot");
    assert.equal(read.base.schema, other);
  });

  it("after any concurrent edits, an updated entry reads exactly as a fresh read of the merged document", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { minLength: 5, maxLength: 20 }),
        fc.array(step, { maxLength: 12 }),
        fc.array(step, { maxLength: 12 }),
        async (shared, left, right) => {
          const replica = new LoroDoc();
          replica.setPeerId(1);
          const seed = openDocument(replica, timelineSchema);
          for (const current of shared) run(seed, current);
          replica.commit();
          const host = hostOf(replica);
          const cache = createDocumentCache();
          await cache.checkout("doc", host.version(), timelineSchema, { documents: 4 }, host.load);
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
          const next = await cache.checkout(
            "doc",
            host.version(),
            timelineSchema,
            { documents: 4 },
            host.load,
          );
          assert.deepEqual(
            view(openDocument(next.doc, timelineSchema, { projection: next.base })),
            freshView(replica),
          );
        },
      ),
      { numRuns: 40 },
    );
  });
});
