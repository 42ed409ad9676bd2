/** The document server with its clients: a document read back, merges, conflicts, refusals. */
import assert from "node:assert/strict";
import { it } from "node:test";
import { LoroDoc, LoroMap } from "loro-crdt";
import { createDocumentClient, interpretDocument, openDocument, timelineSchema } from "../src/index.ts";
import type { SuiteServer } from "./document-server-harness.ts";
import { createEditor, seedTrack } from "./timeline-fixture.ts";

export function syncTests(suite: SuiteServer): void {
  it("reads entities and relations back identically after push, server storage, restart and pull", () =>
    readsBackAfterRestart(suite));
  it("merges two clients' independent edits: both commit and both see the merge", () =>
    mergesIndependentEdits(suite));
  it("answers a merge that no longer projects conflicted, naming the constraint; stores it only on apply-remaining", () =>
    conflictedMerge(suite));
  it("rejects garbage bytes and schema-breaking updates, leaving the stored document byte-identical", () =>
    rejectsGarbage(suite));
  it("takes the origin and token per document and a fetchImpl override; a retried push stores nothing twice", () =>
    originAndTokenPerDocument(suite));
  it("rejects an update whose dependencies the server lacks", () => lacksDependencies(suite));
}

async function readsBackAfterRestart(suite: SuiteServer): Promise<void> {
  const { documentId, token } = await suite.newDocument();
  const writer = createEditor(suite.server.url, documentId, token, 11);
  await writer.pull();
  const result = await writer.edit((session) => {
    const ids = seedTrack(session);
    const caption = session.entities.create({
      entityKind: "caption",
      payload: { text: "Grüße 👋 aus Köln" },
    });
    session.entities.update(caption.entityId, [
      { op: "splice", path: ["text"], index: 6, deleteCount: 1, insert: "🎉" },
    ]);
    const script = session.entities.create({
      entityKind: "audio-script",
      payload: {
        segments: [{ startMs: 0, endMs: 900, text: "hallo" }],
        transcription: { system: "files", key: "t-1" },
      },
    });
    session.relations.link({
      relationKind: "transcript-of",
      endpoint0EntityId: script.entityId,
      endpoint1EntityId: ids.audioId,
    });
  });
  assert.equal(result.status, "committed");
  const written = interpretDocument(writer.doc, timelineSchema);
  assert.deepEqual(written.issues, []);
  assert.equal(
    written.entities.find((entity) => entity.entityKind === "caption")?.payload.text,
    "Grüße 🎉 aus Köln",
  );

  await suite.restart();
  const reader = createEditor(suite.server.url, documentId, token, 12);
  await reader.pull();
  const read = interpretDocument(reader.doc, timelineSchema);
  assert.deepEqual(read.entities, written.entities);
  assert.deepEqual(read.relations, written.relations);
  assert.deepEqual(read.issues, []);
}

async function mergesIndependentEdits(suite: SuiteServer): Promise<void> {
  const { documentId, token } = await suite.newDocument();
  const seeder = createEditor(suite.server.url, documentId, token, 21);
  await seeder.pull();
  let ids = { trackId: "", clipId: "", markerId: "", audioId: "" };
  assert.equal((await seeder.edit((session) => (ids = seedTrack(session)))).status, "committed");
  const alice = createEditor(suite.server.url, documentId, token, 22);
  const bob = createEditor(suite.server.url, documentId, token, 23);
  await Promise.all([alice.pull(), bob.pull()]);
  const [aliceResult, bobResult] = await Promise.all([
    alice.edit((session) =>
      session.entities.update(ids.clipId, [{ op: "set", path: ["volume"], value: -6 }]),
    ),
    bob.edit((session) =>
      session.entities.update(ids.trackId, [{ op: "set", path: ["name"], value: "score" }]),
    ),
  ]);
  assert.equal(aliceResult.status, "committed");
  assert.equal(bobResult.status, "committed");
  await Promise.all([alice.pull(), bob.pull()]);
  for (const editor of [alice, bob]) {
    const session = editor.session();
    assert.equal(session.entities.get(ids.clipId)?.payload.volume, -6);
    assert.equal(session.entities.get(ids.trackId)?.payload.name, "score");
    assert.deepEqual(session.check(), []);
  }
}

async function conflictedMerge(suite: SuiteServer): Promise<void> {
  const { documentId, token } = await suite.newDocument();
  const seeder = createEditor(suite.server.url, documentId, token, 31);
  await seeder.pull();
  let first = { trackId: "", clipId: "", markerId: "", audioId: "" };
  let second = { trackId: "", clipId: "", markerId: "", audioId: "" };
  await seeder.edit((session) => {
    first = seedTrack(session, "file-a");
    second = seedTrack(session, "file-b");
  });
  const alice = createEditor(suite.server.url, documentId, token, 32);
  const bob = createEditor(suite.server.url, documentId, token, 33);
  await Promise.all([alice.pull(), bob.pull()]);
  // Alice moves the first clip's marker to the second clip, Bob moves it to a clip of his own; each
  // gives the first clip a fresh marker. Valid alone; merged, two clips claim one marker.
  const third = { clipId: "" };
  const aliceResult = await alice.edit((session) => {
    const fresh = session.entities.create({
      entityKind: "sequence-marker",
      payload: { startMs: 0, durationMs: 5000 },
    });
    session.relations.unlink(`${second.clipId}#marker`);
    session.entities.delete(second.markerId);
    session.relations.move(`${first.clipId}#marker`, { endpoint0EntityId: second.clipId });
    session.relations.link({
      relationKind: "marker",
      endpoint0EntityId: first.clipId,
      endpoint1EntityId: fresh.entityId,
    });
  });
  assert.equal(aliceResult.status, "committed");
  const bobResult = await bob.edit((session) => {
    const clip = session.entities.create({ entityKind: "clip" });
    third.clipId = clip.entityId;
    const fresh = session.entities.create({
      entityKind: "sequence-marker",
      payload: { startMs: 0, durationMs: 5000 },
    });
    session.relations.link({
      relationKind: "contain",
      endpoint0EntityId: first.trackId,
      endpoint1EntityId: clip.entityId,
    });
    session.relations.link({
      relationKind: "contain",
      endpoint0EntityId: clip.entityId,
      endpoint1EntityId: first.audioId,
    });
    session.relations.move(`${first.clipId}#marker`, { endpoint0EntityId: clip.entityId });
    session.relations.link({
      relationKind: "marker",
      endpoint0EntityId: first.clipId,
      endpoint1EntityId: fresh.entityId,
    });
  });
  assert.equal(bobResult.status, "conflicted", JSON.stringify(bobResult));
  assert.ok(bobResult.status === "conflicted");
  assert.equal(bobResult.applied, false);
  assert.ok(bobResult.reasons.length > 0);
  const bobBytes = bob.doc.export({ mode: "update", from: alice.doc.oplogVersion() });
  // Retrying the same bytes (an unconfirmed commit) still stores nothing and answers conflicted.
  const retried = await bob.client.push(documentId, bobBytes);
  assert.equal(retried.status, "conflicted");
  const probe = createEditor(suite.server.url, documentId, token, 35);
  await probe.pull();
  assert.deepEqual(interpretDocument(probe.doc, timelineSchema).issues, [], "nothing of Bob's was stored");
  // What remains of Bob's plan would still leave two claims on one marker: apply_remaining refuses.
  const refused = await bob.client.push(documentId, bobBytes, { applyRemaining: true });
  assert.ok(refused.status === "conflicted" && !refused.applied, JSON.stringify(refused));
  assert.match(refused.refused ?? "", /apply_remaining refused/);
  const named = bobResult.issues.find((issue) => issue.entityId === first.markerId);
  assert.equal(named?.constraint, "relation.cardinality");
  assert.match(named?.message ?? "", new RegExp(`${second.clipId}|${third.clipId}`));

  // Nothing stored: after a restart the document is Alice's, and valid.
  await suite.restart();
  const reader = createEditor(suite.server.url, documentId, token, 34);
  await reader.pull();
  assert.deepEqual(interpretDocument(reader.doc, timelineSchema).issues, []);
  assert.equal(reader.doc.getMap("entities").get(third.clipId), undefined);
}

async function rejectsGarbage(suite: SuiteServer): Promise<void> {
  const { documentId, token } = await suite.newDocument();
  const writer = createEditor(suite.server.url, documentId, token, 41);
  await writer.pull();
  let ids = { trackId: "", clipId: "", markerId: "", audioId: "" };
  await writer.edit((session) => (ids = seedTrack(session)));
  // A client that will miss the next commit.
  const stale = createEditor(suite.server.url, documentId, token, 43);
  await stale.pull();
  await writer.edit((session) =>
    session.entities.update(ids.clipId, [{ op: "set", path: ["speed"], value: 2 }]),
  );
  const store = await suite.factory.open();
  const storedBefore = await store.load(documentId);
  const snapshotBefore = await writer.client.pull(documentId);

  const garbage = await writer.client.push(documentId, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]));
  assert.equal(garbage.status, "rejected");
  assert.ok(garbage.status === "rejected");
  assert.match(garbage.reasons[0] ?? "", /not a Loro update/);

  // A raw Loro write past the session: a clip volume out of range.
  const before = writer.doc.oplogVersion();
  ((writer.doc.getMap("entities").get(ids.clipId) as LoroMap).get("fields") as LoroMap).set("volume", 99);
  writer.doc.commit();
  const breaking = await writer.client.push(documentId, writer.doc.export({ mode: "update", from: before }));
  assert.equal(breaking.status, "rejected");
  assert.ok(breaking.status === "rejected");
  assert.deepEqual(
    breaking.issues.map((issue) => [issue.constraint, issue.entityId, issue.path]),
    [["field.max", ids.clipId, ["volume"]]],
  );

  // The same break from a client that missed a concurrent commit: still its own fault, so rejected.
  const staleVersion = stale.doc.oplogVersion();
  ((stale.doc.getMap("entities").get(ids.trackId) as LoroMap).get("fields") as LoroMap).set(
    "role",
    "karaoke",
  );
  stale.doc.commit();
  const staleBreak = await stale.client.push(
    documentId,
    stale.doc.export({ mode: "update", from: staleVersion }),
  );
  assert.equal(staleBreak.status, "rejected");
  assert.ok(staleBreak.status === "rejected");
  assert.deepEqual(
    staleBreak.issues.map((issue) => issue.constraint),
    ["field.enum"],
  );

  // A row with no kind, and a root container the mapping does not know.
  const stray = new LoroDoc();
  stray.setPeerId(42);
  stray.import(snapshotBefore.bytes);
  const strayVersion = stray.oplogVersion();
  stray.getMap("entities").setContainer("nameless", new LoroMap()).set("x", 1);
  stray.getList("elsewhere").push(1);
  stray.commit();
  const shapeless = await writer.client.push(
    documentId,
    stray.export({ mode: "update", from: strayVersion }),
  );
  assert.equal(shapeless.status, "rejected");

  const storedAfter = await store.load(documentId);
  await store.close();
  assert.deepEqual(storedAfter, storedBefore);
  const snapshotAfter = await writer.client.pull(documentId);
  assert.deepEqual(snapshotAfter.bytes, snapshotBefore.bytes);
  assert.equal(snapshotAfter.version, snapshotBefore.version);
}

async function originAndTokenPerDocument(suite: SuiteServer): Promise<void> {
  const { documentId, token } = await suite.newDocument();
  const seen: string[] = [];
  const client = createDocumentClient({
    origin: (id) => (id === documentId ? suite.server.url : "http://127.0.0.1:9"),
    token: async (id) => (id === documentId ? token : "none"),
    fetchImpl: async (input, init) => {
      seen.push(`${init?.method ?? "GET"} ${new URL(String(input)).pathname}`);
      return fetch(input, init);
    },
  });
  const doc = new LoroDoc();
  doc.setPeerId(71);
  await client.pullInto(documentId, doc);
  const before = doc.oplogVersion();
  seedTrack(openDocument(doc, timelineSchema));
  doc.commit();
  const update = doc.export({ mode: "update", from: before });
  const first = await client.push(documentId, update);
  assert.equal(first.status, "committed");
  const store = await suite.factory.open();
  const storedOnce = await store.load(documentId);
  const retried = await client.push(documentId, update);
  assert.deepEqual(retried, { ...first, duplicate: true });
  assert.deepEqual(await store.load(documentId), storedOnce);
  await store.close();
  assert.deepEqual(seen, [
    `GET /documents/${documentId}/snapshot`,
    `POST /documents/${documentId}/push`,
    `POST /documents/${documentId}/push`,
  ]);
}

async function lacksDependencies(suite: SuiteServer): Promise<void> {
  const { documentId, token } = await suite.newDocument();
  const writer = createEditor(suite.server.url, documentId, token, 81);
  await writer.pull();
  const unsent = writer.doc.oplogVersion();
  const ids = seedTrack(writer.session());
  writer.doc.commit();
  const middle = writer.doc.oplogVersion();
  writer.session().entities.update(ids.clipId, [{ op: "set", path: ["volume"], value: -9 }]);
  writer.doc.commit();
  const result = await writer.client.push(documentId, writer.doc.export({ mode: "update", from: middle }));
  assert.equal(result.status, "rejected");
  assert.ok(result.status === "rejected");
  assert.match(result.reasons[0] ?? "", /depends on changes/);
  // The fork the server checked in was polluted by the pending change; the next push still lands.
  assert.equal(
    (await writer.client.push(documentId, writer.doc.export({ mode: "update", from: unsent }))).status,
    "committed",
  );
}
