/** The document server's behaviour, run once per store (SQLite, PostgreSQL). */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { LoroDoc, LoroMap } from "loro-crdt";
import {
  createDocumentClient,
  type DocumentSession,
  interpretDocument,
  openDocument,
  timelineSchema,
} from "../src/index.ts";
import { type DocumentStore, type RunningDocumentServer, serveDocuments } from "../src/server/index.ts";
import { createEditor, seedTrack } from "./timeline-fixture.ts";

export interface StoreFactory {
  readonly name: string;
  /** A store over the same data each time it is called (a restart). */
  open(): Promise<DocumentStore>;
  cleanup(): Promise<void>;
}

const adminToken = "admin-token-0123456789";

export function documentServerSuite(factory: StoreFactory): void {
  describe(`document server on ${factory.name}`, () => {
    let server: RunningDocumentServer;
    let counter = 0;
    const start = async (compactEvery = 100) => {
      server = await serveDocuments({
        store: await factory.open(),
        schema: timelineSchema,
        adminToken,
        compactEvery,
      });
    };
    const restart = async (compactEvery = 100) => {
      await server.close();
      await start(compactEvery);
    };
    const newDocument = async () => {
      counter += 1;
      const documentId = `doc-${counter}`;
      const token = `token-${counter}-0123456789abcdef`;
      const admin = createEditor(server.url, documentId, token, 1);
      assert.equal(await admin.client.createDocument(documentId, { adminToken, token }), true);
      return { documentId, token };
    };

    before(async () => start());
    after(async () => {
      await server.close();
      await factory.cleanup();
    });

    it("reads entities and relations back identically after push, server storage, restart and pull", async () => {
      const { documentId, token } = await newDocument();
      const writer = createEditor(server.url, documentId, token, 11);
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

      await restart();
      const reader = createEditor(server.url, documentId, token, 12);
      await reader.pull();
      const read = interpretDocument(reader.doc, timelineSchema);
      assert.deepEqual(read.entities, written.entities);
      assert.deepEqual(read.relations, written.relations);
      assert.deepEqual(read.issues, []);
    });

    it("merges two clients' independent edits: both commit and both see the merge", async () => {
      const { documentId, token } = await newDocument();
      const seeder = createEditor(server.url, documentId, token, 21);
      await seeder.pull();
      let ids = { trackId: "", clipId: "", markerId: "", audioId: "" };
      assert.equal((await seeder.edit((session) => (ids = seedTrack(session)))).status, "committed");
      const alice = createEditor(server.url, documentId, token, 22);
      const bob = createEditor(server.url, documentId, token, 23);
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
    });

    it("answers a merge that no longer projects conflicted, naming the constraint; stores it only on apply-remaining", async () => {
      const { documentId, token } = await newDocument();
      const seeder = createEditor(server.url, documentId, token, 31);
      await seeder.pull();
      let first = { trackId: "", clipId: "", markerId: "", audioId: "" };
      let second = { trackId: "", clipId: "", markerId: "", audioId: "" };
      await seeder.edit((session) => {
        first = seedTrack(session, "file-a");
        second = seedTrack(session, "file-b");
      });
      const alice = createEditor(server.url, documentId, token, 32);
      const bob = createEditor(server.url, documentId, token, 33);
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
      const probe = createEditor(server.url, documentId, token, 35);
      await probe.pull();
      assert.deepEqual(
        interpretDocument(probe.doc, timelineSchema).issues,
        [],
        "nothing of Bob's was stored",
      );
      // What remains of Bob's plan would still leave two claims on one marker: apply_remaining refuses.
      const refused = await bob.client.push(documentId, bobBytes, { applyRemaining: true });
      assert.ok(refused.status === "conflicted" && !refused.applied, JSON.stringify(refused));
      assert.match(refused.refused ?? "", /apply_remaining refused/);
      const named = bobResult.issues.find((issue) => issue.entityId === first.markerId);
      assert.equal(named?.constraint, "relation.cardinality");
      assert.match(named?.message ?? "", new RegExp(`${second.clipId}|${third.clipId}`));

      // Nothing stored: after a restart the document is Alice's, and valid.
      await restart();
      const reader = createEditor(server.url, documentId, token, 34);
      await reader.pull();
      assert.deepEqual(interpretDocument(reader.doc, timelineSchema).issues, []);
      assert.equal(reader.doc.getMap("entities").get(third.clipId), undefined);
    });

    it("rejects garbage bytes and schema-breaking updates, leaving the stored document byte-identical", async () => {
      const { documentId, token } = await newDocument();
      const writer = createEditor(server.url, documentId, token, 41);
      await writer.pull();
      let ids = { trackId: "", clipId: "", markerId: "", audioId: "" };
      await writer.edit((session) => (ids = seedTrack(session)));
      // A client that will miss the next commit.
      const stale = createEditor(server.url, documentId, token, 43);
      await stale.pull();
      await writer.edit((session) =>
        session.entities.update(ids.clipId, [{ op: "set", path: ["speed"], value: 2 }]),
      );
      const store = await factory.open();
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
      const breaking = await writer.client.push(
        documentId,
        writer.doc.export({ mode: "update", from: before }),
      );
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
    });

    it("takes the origin and token per document and a fetchImpl override; a retried push stores nothing twice", async () => {
      const { documentId, token } = await newDocument();
      const seen: string[] = [];
      const client = createDocumentClient({
        origin: (id) => (id === documentId ? server.url : "http://127.0.0.1:9"),
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
      const store = await factory.open();
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
    });

    it("rejects an update whose dependencies the server lacks", async () => {
      const { documentId, token } = await newDocument();
      const writer = createEditor(server.url, documentId, token, 81);
      await writer.pull();
      const unsent = writer.doc.oplogVersion();
      const ids = seedTrack(writer.session());
      writer.doc.commit();
      const middle = writer.doc.oplogVersion();
      writer.session().entities.update(ids.clipId, [{ op: "set", path: ["volume"], value: -9 }]);
      writer.doc.commit();
      const result = await writer.client.push(
        documentId,
        writer.doc.export({ mode: "update", from: middle }),
      );
      assert.equal(result.status, "rejected");
      assert.ok(result.status === "rejected");
      assert.match(result.reasons[0] ?? "", /depends on changes/);
      // The fork the server checked in was polluted by the pending change; the next push still lands.
      assert.equal(
        (await writer.client.push(documentId, writer.doc.export({ mode: "update", from: unsent }))).status,
        "committed",
      );
    });

    it("two servers over one store both accept pushes and see each other's", async () => {
      const { documentId, token } = await newDocument();
      const second = await serveDocuments({ store: await factory.open(), schema: timelineSchema });
      try {
        const alice = createEditor(server.url, documentId, token, 91);
        const bob = createEditor(second.url, documentId, token, 92);
        await alice.pull();
        let ids = { trackId: "", clipId: "", markerId: "", audioId: "" };
        assert.equal((await alice.edit((session) => (ids = seedTrack(session)))).status, "committed");
        await bob.pull();
        assert.equal(
          (
            await bob.edit((session) =>
              session.entities.update(ids.trackId, [{ op: "set", path: ["muted"], value: true }]),
            )
          ).status,
          "committed",
        );
        assert.equal(
          (
            await alice.edit((session) =>
              session.entities.update(ids.clipId, [{ op: "set", path: ["speed"], value: 1.5 }]),
            )
          ).status,
          "committed",
        );
        await Promise.all([alice.pull(), bob.pull()]);
        for (const editor of [alice, bob]) {
          assert.equal(editor.session().entities.get(ids.trackId)?.payload.muted, true);
          assert.equal(editor.session().entities.get(ids.clipId)?.payload.speed, 1.5);
        }
        // Both servers kept the rows with each push they stored: pages through either show every push.
        for (let round = 0; round < 3; round++) {
          const [through, volume] = round % 2 === 0 ? [bob, -1 - round] : [alice, -1 - round];
          await through.pull();
          const pushed = await through.edit((session) =>
            session.entities.update(ids.clipId, [{ op: "set", path: ["volume"], value: volume }]),
          );
          assert.equal(pushed.status, "committed");
          for (const reader of [alice, bob]) {
            const page = await reader.client.entities(documentId, { ids: [ids.trackId, ids.clipId] });
            const byId = new Map(page.entities.map((entity) => [entity.entityId, entity.payload]));
            assert.equal(byId.get(ids.clipId)?.volume, volume, `round ${round}`);
            assert.equal(byId.get(ids.clipId)?.speed, 1.5);
            assert.equal(byId.get(ids.trackId)?.muted, true);
          }
        }
        const store = await factory.open();
        try {
          const last = (await store.updatesAfter(documentId, 0)).at(-1)?.seq;
          assert.equal(await store.rowsSeq(documentId), last, "the rows hold through the last push");
        } finally {
          await store.close();
        }
      } finally {
        await second.close();
      }
    });

    it("answers 401 without a token, and 404 alike for a wrong token and an unknown document", async () => {
      const { documentId } = await newDocument();
      const fetchStatus = async (path: string, token?: string, method = "GET") =>
        (
          await fetch(`${server.url}${path}`, {
            method,
            headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
          })
        ).status;
      assert.equal(await fetchStatus(`/documents/${documentId}/snapshot`), 401);
      assert.equal(await fetchStatus(`/documents/${documentId}/snapshot`, "wrong-token-0123456789"), 404);
      assert.equal(await fetchStatus(`/documents/${documentId}/push`, "wrong-token-0123456789", "POST"), 404);
      assert.equal(await fetchStatus("/documents/no-such-document/snapshot", "any-token-0123456789"), 404);
      // Without a token nothing says whether a document exists.
      assert.equal(await fetchStatus("/documents/no-such-document/snapshot"), 401);
      const stranger = createEditor(server.url, "no-such-document", "any-token-0123456789", 51);
      await assert.rejects(
        stranger.pull(),
        (error: Error & { code?: string }) => error.code === "document_not_found",
      );
      const wrong = createEditor(server.url, documentId, "wrong-token-0123456789", 52);
      await assert.rejects(
        wrong.pull(),
        (error: Error & { code?: string }) => error.code === "document_not_found",
      );
      assert.equal(await fetchStatus("/documents", "not-the-admin-token", "POST"), 403);
      // One document's token never opens another, however many ask at once.
      const other = await newDocument();
      const crossed = await Promise.all(
        Array.from({ length: 10 }, (_, index) =>
          fetchStatus(
            `/documents/${index % 2 === 0 ? documentId : other.documentId}/snapshot`,
            index % 2 === 0 ? other.token : "wrong-token-0123456789",
          ),
        ),
      );
      assert.deepEqual(
        crossed,
        Array.from({ length: 10 }, () => 404),
      );
      assert.equal(await fetchStatus(`/documents/${other.documentId}/snapshot`, other.token), 200);
      const badVersion = await fetch(`${server.url}/documents/${other.documentId}/updates?since=%%%`, {
        headers: { authorization: `Bearer ${other.token}` },
      });
      assert.equal(badVersion.status, 400);
      assert.equal(((await badVersion.json()) as { error: { code: string } }).error.code, "invalid_version");
    });

    it("serves the updates since a version, and compacts the log into a snapshot that survives restart", async () => {
      await restart(3);
      const { documentId, token } = await newDocument();
      const writer = createEditor(server.url, documentId, token, 61);
      await writer.pull();
      let ids = { trackId: "", clipId: "", markerId: "", audioId: "" };
      await writer.edit((session) => (ids = seedTrack(session)));
      const follower = createEditor(server.url, documentId, token, 62);
      await follower.pull();
      for (let volume = -1; volume >= -5; volume--) {
        assert.equal(
          (
            await writer.edit((session) =>
              session.entities.update(ids.clipId, [{ op: "set", path: ["volume"], value: volume }]),
            )
          ).status,
          "committed",
        );
      }
      const since = await follower.client.pull(documentId, {
        since: (await follower.client.pull(documentId)).version,
      });
      assert.equal(since.kind, "updates");
      // The follower has an unpushed change of its own: pulling still brings exactly what it lacks.
      follower.session().entities.update(ids.trackId, [{ op: "set", path: ["name"], value: "local" }]);
      follower.doc.commit();
      await follower.pull();
      assert.equal(follower.session().entities.get(ids.clipId)?.payload.volume, -5);
      assert.equal(follower.session().entities.get(ids.trackId)?.payload.name, "local");

      // Compaction runs after the push answers; give it its turn before restarting.
      await writer.client.pull(documentId);
      const store = await factory.open();
      const stored = await store.load(documentId);
      // The seq a server checks before each push (has another server compacted past it?), read alone.
      const snapshotSeq = await store.snapshotSeq?.(documentId);
      const missing = await store.snapshotSeq?.("no-such-document");
      await store.close();
      assert.ok((stored?.snapshotSeq ?? 0) >= 3, `snapshotSeq ${stored?.snapshotSeq}`);
      assert.equal(snapshotSeq, stored?.snapshotSeq);
      assert.equal(missing, undefined);
      await restart();
      const reader = createEditor(server.url, documentId, token, 63);
      await reader.pull();
      assert.deepEqual(
        interpretDocument(reader.doc, timelineSchema),
        interpretDocument(writer.doc, timelineSchema),
      );
    });

    it("keeps the store's rows equal to the document's, push by push, and writes rows an update was appended without", async () => {
      const { documentId, token } = await newDocument();
      const writer = createEditor(server.url, documentId, token, 71);
      await writer.pull();
      let ids = { trackId: "", clipId: "", markerId: "", audioId: "" };
      await writer.edit((session) => {
        ids = seedTrack(session, "rows-a");
        seedTrack(session, "rows-b");
      });
      const side = await factory.open();
      try {
        const expect = async (doc: LoroDoc, message: string) => {
          const rows = await allStoredRows(side, documentId);
          assert.deepEqual(rows.entities, doc.getMap("entities").toJSON(), message);
          assert.deepEqual(rows.relations, doc.getMap("relations").toJSON(), message);
          assert.deepEqual(await storedCounts(side, documentId), countsOf(doc), message);
          return rows;
        };
        const seeded = await expect(writer.doc, "after the first push");
        assert.equal(
          Object.keys(seeded.entities).length,
          6,
          "two tracks, clips and audios (markers embedded)",
        );
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
        const other = createEditor(server.url, documentId, token, 72);
        await other.pull();
        const appendWithoutRows = async (durationMs: number) => {
          const from = other.doc.oplogVersion();
          other
            .session()
            .entities.update(ids.audioId, [{ op: "set", path: ["durationMs"], value: durationMs }]);
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
        await restart();
        const reader = createEditor(server.url, documentId, token, 73);
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
    });

    it("keeps each document's change log: newest first, paged, with who, plan ids and counts, through compaction and restart", async () => {
      await restart(2);
      const { documentId, token } = await newDocument();
      const other = await newDocument();
      const startedAt = Date.now();
      const writer = createEditor(server.url, documentId, token, 101);
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
      const planner = createEditor(server.url, documentId, token, 102);
      await planner.pull();
      const before = planner.doc.oplogVersion();
      const caption = planner.session().entities.create({ entityKind: "caption", payload: { text: "hi" } });
      planner.doc.commit({ message: JSON.stringify({ planId: "plan_log_1" }) });
      const planUpdate = planner.doc.export({ mode: "update", from: before });
      assert.equal((await planner.client.push(documentId, planUpdate)).status, "committed");
      // A retry, a rejected push and another document's push add nothing to this log.
      assert.equal((await planner.client.push(documentId, planUpdate)).status, "committed");
      assert.equal((await planner.client.push(documentId, new Uint8Array([1, 2, 3]))).status, "rejected");
      const elsewhere = createEditor(server.url, other.documentId, other.token, 103);
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
      const store = await factory.open();
      const stored = await store.load(documentId);
      await store.close();
      assert.ok((stored?.snapshotSeq ?? 0) >= 2, `snapshotSeq ${stored?.snapshotSeq}`);
      await restart();
      const reader = createEditor(server.url, documentId, token, 104);
      assert.deepEqual(await reader.client.changes(documentId, { limit: 1000 }), log);
      const fetchStatus = async (query: string, bearer?: string) =>
        (
          await fetch(`${server.url}/documents/${documentId}/changes${query}`, {
            headers: bearer === undefined ? {} : { authorization: `Bearer ${bearer}` },
          })
        ).status;
      assert.equal(await fetchStatus(""), 401);
      assert.equal(await fetchStatus("", other.token), 404);
      assert.equal(await fetchStatus("?limit=0", token), 400);
      assert.equal(await fetchStatus("?cursor=abc", token), 400);
      assert.equal(
        (await reader.client.changes(other.documentId).catch((error) => error)).code,
        "document_not_found",
      );
    });

    it("pages entities and relations from the stored rows: by kind, ids, endpoint and cursor, with totals and issues", async () => {
      const { documentId, token } = await newDocument();
      const writer = createEditor(server.url, documentId, token, 81);
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
      const alice = createEditor(server.url, documentId, token, 82);
      const bob = createEditor(server.url, documentId, token, 83);
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
      await server.close();
      const store = await factory.open();
      const stored = await store.load(documentId);
      await store.append({
        documentId,
        seq: (stored?.updates.at(-1)?.seq ?? stored?.snapshotSeq ?? 0) + 1,
        bytes: bobBytes,
        status: "conflicted",
      });
      await store.close();
      await start();
      const reader = createEditor(server.url, documentId, token, 85);
      await reader.pull();
      const withIssues = interpretDocument(reader.doc, timelineSchema).issues;
      assert.ok(
        withIssues.some((issue) => issue.constraint === "entity.identity"),
        JSON.stringify(withIssues),
      );
      assert.deepEqual((await reader.client.entities(documentId, { limit: 1 })).issues, withIssues);
      const carol = createEditor(server.url, documentId, token, 84);
      await carol.pull();
      const fixed = await carol.edit((session) => session.entities.delete(bobTwin));
      assert.equal(fixed.status, "committed", JSON.stringify(fixed));
      assert.deepEqual((await carol.client.entities(documentId, { limit: 1 })).issues, []);
    });
  });
}

/** The entities and relations per kind the store counts, `type:kind` sorted. */
async function storedCounts(store: DocumentStore, documentId: string): Promise<Record<string, number>> {
  const rows = await store.countMembers(documentId);
  return Object.fromEntries(rows.map((row) => [`${row.type}:${row.kind}`, row.count] as const).sort());
}

/** The entities and relations per kind a document projects to, keyed as `storedCounts`. */
function countsOf(doc: LoroDoc): Record<string, number> {
  const view = interpretDocument(doc, timelineSchema);
  const counts = new Map<string, number>();
  const add = (key: string) => counts.set(key, (counts.get(key) ?? 0) + 1);
  for (const entity of view.entities) add(`entity:${entity.entityKind}`);
  for (const relation of view.relations) add(`relation:${relation.relationKind}`);
  return Object.fromEntries([...counts].sort());
}

/** Every row the store keeps for a document, read a page of two at a time. */
async function allStoredRows(store: DocumentStore, documentId: string) {
  const result = {
    entities: {} as Record<string, unknown>,
    relations: {} as Record<string, unknown>,
    versions: {} as Record<string, number>,
  };
  for (const root of ["entities", "relations"] as const) {
    let after: string | undefined;
    for (;;) {
      const page = await store.readRows(documentId, { root, after, limit: 2 });
      for (const row of page) {
        result[root][row.rowId] = row.json;
        result.versions[`${root}/${row.rowId}`] = row.version;
      }
      if (page.length < 2) break;
      after = page.at(-1)?.rowId;
    }
  }
  return result;
}
