/** The document server's stored rows: kept equal to the document, the change log, pages. */

import assert from "node:assert/strict";
import { it } from "node:test";
import { isNotFound } from "@tackle/core";
import type { LoroDoc } from "loro-crdt";
import { type DocumentSession, interpretDocument, timelineSchema } from "../src/index.ts";
import { allStoredRows, countsOf, type SuiteServer, storedCounts } from "./document-server-harness.ts";
import { createEditor, seedTrack } from "./timeline-fixture.ts";

export function rowsTests(suite: SuiteServer): void {
  it("keeps the store's rows equal to the document's, push by push, and writes rows an update was appended without", () =>
    rowsKeptEqual(suite));
  it("keeps each document's change log: newest first, paged, with who, plan ids and counts, through compaction and restart", () =>
    changeLogKept(suite));
  it("pages entities and relations from the stored rows: by kind, ids, endpoint and cursor, with totals and issues", () =>
    pagesFromStoredRows(suite));
}

async function rowsKeptEqual(suite: SuiteServer): Promise<void> {
  const { documentId, token } = await suite.newDocument();
  const writer = createEditor(suite.server.url, documentId, token, 71);
  await writer.pull();
  let ids = { trackId: "", clipId: "", markerId: "", audioId: "" };
  await writer.edit((session) => {
    ids = seedTrack(session, "rows-a");
    seedTrack(session, "rows-b");
  });
  const side = await suite.factory.open();
  try {
    const expect = async (doc: LoroDoc, message: string) => {
      const rows = await allStoredRows(side, documentId);
      assert.deepEqual(rows.entities, doc.getMap("entities").toJSON(), message);
      assert.deepEqual(rows.relations, doc.getMap("relations").toJSON(), message);
      assert.deepEqual(await storedCounts(side, documentId), countsOf(doc), message);
      return rows;
    };
    const seeded = await expect(writer.doc, "after the first push");
    assert.equal(Object.keys(seeded.entities).length, 6, "two tracks, clips and audios (markers embedded)");
    assert.equal(Object.keys(seeded.relations).length, 2, "the tracks' contain relations");
    assert.ok(Object.values(seeded.versions).every((version) => version === 1));

    // A second push: only the rows it wrote carry its seq; a deleted clip's row is gone.
    const result = await writer.edit((session) => {
      session.entities.update(ids.trackId, [{ op: "set", path: ["name"], value: "score" }]);
      session.entities.delete(ids.clipId);
    });
    assert.equal(result.status, "committed");
    const edited = await expect(writer.doc, "after an update and a delete");
    assert.equal(edited.versions[`entities/${ids.trackId}`], 2);
    assert.equal(edited.versions[`entities/${ids.clipId}`], undefined);
    assert.equal(edited.versions[`entities/${ids.audioId}`], 1);
    const counts = await side.countRows(documentId);
    assert.equal(counts.find((row) => row.root === "entities" && row.kind === "track")?.count, 2);
    assert.equal(counts.find((row) => row.root === "entities" && row.kind === "clip")?.count, 1);

    // A page by kind, from a cursor.
    const tracks = await side.readRows(documentId, { root: "entities", kinds: ["track"], limit: 1 });
    assert.equal(tracks.length, 1);
    const nextTrack = await side.readRows(documentId, {
      root: "entities",
      kinds: ["track"],
      after: tracks[0]?.rowId,
      limit: 5,
    });
    assert.equal(nextTrack.length, 1);
    assert.ok((nextTrack[0]?.rowId ?? "") > (tracks[0]?.rowId ?? ""));

    // A rejected push changes no row.
    const before = writer.doc.oplogVersion();
    writer.doc.getMap("stray").set("x", 1);
    writer.doc.getMap("entities").delete(ids.trackId);
    writer.doc.commit();
    const rejected = await writer.client.push(
      documentId,
      writer.doc.export({ mode: "update", from: before }),
    );
    assert.equal(rejected.status, "rejected");
    assert.deepEqual(await allStoredRows(side, documentId), edited);

    // An update appended without rows (as by a server before the store kept them): the server
    // holding the document open writes its rows on its next call, before a page reads them.
    const other = createEditor(suite.server.url, documentId, token, 72);
    await other.pull();
    const appendWithoutRows = async (durationMs: number) => {
      const from = other.doc.oplogVersion();
      other.session().entities.update(ids.audioId, [{ op: "set", path: ["durationMs"], value: durationMs }]);
      other.doc.commit();
      const seq = (await side.updatesAfter(documentId, 0)).at(-1)?.seq ?? 0;
      await side.append({
        documentId,
        seq: seq + 1,
        bytes: other.doc.export({ mode: "update", from }),
        status: "committed",
      });
      assert.equal(await side.rowsSeq(documentId), seq);
      return seq + 1;
    };
    const caughtUp = await appendWithoutRows(12_000);
    const page = await writer.client.entities(documentId, { ids: [ids.audioId] });
    assert.equal(page.entities[0]?.payload.durationMs, 12_000, "the page shows the update");
    assert.equal(await side.rowsSeq(documentId), caughtUp);
    const versions = (await allStoredRows(side, documentId)).versions;
    assert.equal(versions[`entities/${ids.audioId}`], caughtUp, "the row carries the update's seq");
    assert.equal(versions[`entities/${ids.trackId}`], 2, "rows it did not change keep theirs");
    await expect(other.doc, "after the open server wrote the rows");

    // The same for a server opening the document afresh: it writes the rows of the updates after
    // the rows' seq, the rest untouched.
    const reopened = await appendWithoutRows(13_000);
    await suite.restart();
    const reader = createEditor(suite.server.url, documentId, token, 73);
    await reader.pull();
    assert.equal(await side.rowsSeq(documentId), reopened);
    const rebuilt = await expect(reader.doc, "after the rows were written on open");
    assert.equal(
      (rebuilt.entities[ids.audioId] as { fields: { durationMs: number } }).fields.durationMs,
      13_000,
    );
    assert.equal(rebuilt.versions[`entities/${ids.trackId}`], 2);
  } finally {
    await side.close();
  }
}

async function changeLogKept(suite: SuiteServer): Promise<void> {
  await suite.restart(2);
  const { documentId, token } = await suite.newDocument();
  const other = await suite.newDocument();
  const startedAt = Date.now();
  const writer = createEditor(suite.server.url, documentId, token, 101);
  await writer.pull();
  let ids = { trackId: "", clipId: "", markerId: "", audioId: "" };
  assert.equal((await writer.edit((session) => (ids = seedTrack(session)))).status, "committed");
  assert.equal(
    (
      await writer.edit((session) =>
        session.entities.update(ids.clipId, [{ op: "set", path: ["volume"], value: -9 }]),
      )
    ).status,
    "committed",
  );
  // A committed plan: its change carries the plan id in its message, as the edit-script tool commits.
  const planner = createEditor(suite.server.url, documentId, token, 102);
  await planner.pull();
  const before = planner.doc.oplogVersion();
  const caption = planner.session().entities.create({ entityKind: "caption", payload: { text: "hi" } });
  planner.doc.commit({ message: JSON.stringify({ planId: "plan_log_1" }) });
  const planUpdate = planner.doc.export({ mode: "update", from: before });
  assert.equal((await planner.client.push(documentId, planUpdate)).status, "committed");
  // A retry, a rejected push and another document's push add nothing to this log.
  assert.equal((await planner.client.push(documentId, planUpdate)).status, "committed");
  assert.equal((await planner.client.push(documentId, new Uint8Array([1, 2, 3]))).status, "rejected");
  const elsewhere = createEditor(suite.server.url, other.documentId, other.token, 103);
  await elsewhere.pull();
  await elsewhere.edit((session) => seedTrack(session));
  await writer.pull();
  assert.equal(
    (await writer.edit((session) => session.entities.delete(caption.entityId))).status,
    "committed",
  );

  const log = await writer.client.changes(documentId);
  assert.equal(log.nextCursor, undefined);
  assert.deepEqual(
    log.changes.map((change) => [
      change.seq,
      change.actor,
      change.credential,
      change.peers,
      change.planIds,
      change.status,
      change.entities,
    ]),
    [
      [4, "user-101", "document", ["101"], [], "committed", { created: 0, changed: 0, deleted: 1 }],
      [
        3,
        "user-102",
        "document",
        ["102"],
        ["plan_log_1"],
        "committed",
        { created: 1, changed: 0, deleted: 0 },
      ],
      [2, "user-101", "document", ["101"], [], "committed", { created: 0, changed: 1, deleted: 0 }],
      [1, "user-101", "document", ["101"], [], "committed", { created: 4, changed: 0, deleted: 0 }],
    ],
  );
  // The seed made four entities and three relations; the later pushes touched entities only.
  assert.deepEqual(
    log.changes.map((change) => change.relations),
    [
      { created: 0, changed: 0, deleted: 0 },
      { created: 0, changed: 0, deleted: 0 },
      { created: 0, changed: 0, deleted: 0 },
      { created: 3, changed: 0, deleted: 0 },
    ],
  );
  for (const change of log.changes) {
    const at = Date.parse(change.at);
    assert.ok(at >= startedAt - 1000 && at <= Date.now() + 1000, change.at);
  }

  // Paged by cursor, two at a time: the same entries in the same order.
  const first = await writer.client.changes(documentId, { limit: 2 });
  assert.deepEqual(
    first.changes.map((change) => change.seq),
    [4, 3],
  );
  assert.ok(first.nextCursor !== undefined);
  const second = await writer.client.changes(documentId, { limit: 2, cursor: first.nextCursor });
  assert.deepEqual(
    second.changes.map((change) => change.seq),
    [2, 1],
  );
  assert.equal(second.nextCursor, undefined);
  assert.deepEqual([...first.changes, ...second.changes], log.changes);

  // Compaction dropped the logged updates; the log keeps every entry, across a restart too.
  const store = await suite.factory.open();
  const stored = await store.load(documentId);
  await store.close();
  assert.ok((stored?.snapshotSeq ?? 0) >= 2, `snapshotSeq ${stored?.snapshotSeq}`);
  await suite.restart();
  const reader = createEditor(suite.server.url, documentId, token, 104);
  assert.deepEqual(await reader.client.changes(documentId, { limit: 1000 }), log);
  const fetchStatus = async (query: string, bearer?: string) =>
    (
      await fetch(`${suite.server.url}/documents/${documentId}/changes${query}`, {
        headers: bearer === undefined ? {} : { authorization: `Bearer ${bearer}` },
      })
    ).status;
  assert.equal(await fetchStatus(""), 401);
  assert.equal(await fetchStatus("", other.token), 404);
  assert.equal(await fetchStatus("?limit=0", token), 400);
  assert.equal(await fetchStatus("?cursor=abc", token), 400);
  const refused = await reader.client.changes(other.documentId).catch((error) => error);
  assert.ok(isNotFound(refused, "document"), String(refused));
  assert.equal(refused.data.id, other.documentId);
}

async function pagesFromStoredRows(suite: SuiteServer): Promise<void> {
  const { documentId, token } = await suite.newDocument();
  const writer = createEditor(suite.server.url, documentId, token, 81);
  await writer.pull();
  let first = { trackId: "", clipId: "", markerId: "", audioId: "" };
  await writer.edit((session) => {
    first = seedTrack(session, "page-a");
    seedTrack(session, "page-b");
    seedTrack(session, "page-c");
  });
  const expected = interpretDocument(writer.doc, timelineSchema);
  // Every entity, two at a time, in id order: markers (embedded in their clips' rows) included.
  const walked: unknown[] = [];
  let after: string | undefined;
  let total = { entities: 0, relations: 0 };
  for (;;) {
    const page = await writer.client.entities(documentId, { limit: 2, after });
    walked.push(...page.entities);
    total = page.total;
    assert.deepEqual(page.issues, []);
    if (page.entities.length < 2) break;
    after = page.entities.at(-1)?.entityId;
  }
  assert.deepEqual(walked, expected.entities);
  assert.deepEqual(total, { entities: expected.entities.length, relations: expected.relations.length });

  const markers = await writer.client.entities(documentId, { kinds: ["sequence-marker"], limit: 10 });
  assert.equal(markers.entities.length, 3);
  assert.ok(markers.entities.some((entity) => entity.entityId === first.markerId));
  const listed = await writer.client.entities(documentId, { ids: [first.clipId, first.audioId, "nope"] });
  assert.deepEqual(
    listed.entities.map((entity) => entity.entityId).sort(),
    [first.audioId, first.clipId].sort(),
  );
  const ofClip = await writer.client.relations(documentId, { endpoint: first.clipId });
  assert.deepEqual(
    ofClip.relations.map((relation) => relation.relationKind).sort(),
    ["contain", "contain", "marker"],
    "held by its track, holding its audio and its marker",
  );
  const relations = await writer.client.relations(documentId, { limit: 100 });
  const byId = (left: { relationId: string }, right: { relationId: string }) =>
    left.relationId < right.relationId ? -1 : 1;
  assert.deepEqual([...relations.relations].sort(byId), [...expected.relations].sort(byId));

  // Each creates a medium for the same file: fine alone, two media for one file once merged. This
  // server refuses to store it even with apply_remaining; a server before ADR 0475 stored it, so it
  // is written straight into the store as that server left it: the page lists the issue after a
  // restart, and not once it is fixed.
  const alice = createEditor(suite.server.url, documentId, token, 82);
  const bob = createEditor(suite.server.url, documentId, token, 83);
  await Promise.all([alice.pull(), bob.pull()]);
  const twin = (session: DocumentSession) =>
    session.entities.create({
      entityKind: "audio",
      payload: { system: "files", key: "twin", durationMs: 5 },
    }).entityId;
  let bobTwin = "";
  const before = bob.doc.oplogVersion();
  assert.equal((await alice.edit((session) => void twin(session))).status, "committed");
  const bobResult = await bob.edit((session) => {
    bobTwin = twin(session);
  });
  assert.equal(bobResult.status, "conflicted", JSON.stringify(bobResult));
  const bobBytes = bob.doc.export({ mode: "update", from: before });
  const refused = await bob.client.push(documentId, bobBytes, { applyRemaining: true });
  assert.ok(refused.status === "conflicted" && !refused.applied, JSON.stringify(refused));
  await suite.server.close();
  const store = await suite.factory.open();
  const stored = await store.load(documentId);
  await store.append({
    documentId,
    seq: (stored?.updates.at(-1)?.seq ?? stored?.snapshotSeq ?? 0) + 1,
    bytes: bobBytes,
    status: "conflicted",
  });
  await store.close();
  await suite.start();
  const reader = createEditor(suite.server.url, documentId, token, 85);
  await reader.pull();
  const withIssues = interpretDocument(reader.doc, timelineSchema).issues;
  assert.ok(
    withIssues.some((issue) => issue.constraint === "entity.identity"),
    JSON.stringify(withIssues),
  );
  assert.deepEqual((await reader.client.entities(documentId, { limit: 1 })).issues, withIssues);
  const carol = createEditor(suite.server.url, documentId, token, 84);
  await carol.pull();
  const fixed = await carol.edit((session) => session.entities.delete(bobTwin));
  assert.equal(fixed.status, "committed", JSON.stringify(fixed));
  assert.deepEqual((await carol.client.entities(documentId, { limit: 1 })).issues, []);
}
