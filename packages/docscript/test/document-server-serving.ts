/** The document server as a service: two servers over one store, who may read, the log and compaction. */

import assert from "node:assert/strict";
import { it } from "node:test";
import { isNotFound } from "@tackle/core";
import { interpretDocument, timelineSchema } from "../src/index.ts";
import { serveDocuments } from "../src/server/index.ts";
import type { SuiteServer } from "./document-server-harness.ts";
import { createEditor, seedTrack } from "./timeline-fixture.ts";

export function servingTests(suite: SuiteServer): void {
  it("two servers over one store both accept pushes and see each other's", () => twoServersOneStore(suite));
  it("answers 401 without a token, and 404 alike for a wrong token and an unknown document", () =>
    unauthorizedAndNotFound(suite));
  it("serves the updates since a version, and compacts the log into a snapshot that survives restart", () =>
    updatesSinceAndCompaction(suite));
}

async function twoServersOneStore(suite: SuiteServer): Promise<void> {
  const { documentId, token } = await suite.newDocument();
  const second = await serveDocuments({ store: await suite.factory.open(), schema: timelineSchema });
  try {
    const alice = createEditor(suite.server.url, documentId, token, 91);
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
    const store = await suite.factory.open();
    try {
      const last = (await store.updatesAfter(documentId, 0)).at(-1)?.seq;
      assert.equal(await store.rowsSeq(documentId), last, "the rows hold through the last push");
    } finally {
      await store.close();
    }
  } finally {
    await second.close();
  }
}

async function unauthorizedAndNotFound(suite: SuiteServer): Promise<void> {
  const { documentId } = await suite.newDocument();
  const fetchStatus = async (path: string, token?: string, method = "GET") =>
    (
      await fetch(`${suite.server.url}${path}`, {
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
  const stranger = createEditor(suite.server.url, "no-such-document", "any-token-0123456789", 51);
  await assert.rejects(stranger.pull(), (error: unknown) => isNotFound(error, "document"));
  const wrong = createEditor(suite.server.url, documentId, "wrong-token-0123456789", 52);
  await assert.rejects(wrong.pull(), (error: unknown) => isNotFound(error, "document"));
  assert.equal(await fetchStatus("/documents", "not-the-admin-token", "POST"), 403);
  // One document's token never opens another, however many ask at once.
  const other = await suite.newDocument();
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
  const badVersion = await fetch(`${suite.server.url}/documents/${other.documentId}/updates?since=%%%`, {
    headers: { authorization: `Bearer ${other.token}` },
  });
  assert.equal(badVersion.status, 400);
  assert.equal(((await badVersion.json()) as { error: { code: string } }).error.code, "invalid_version");
}

async function updatesSinceAndCompaction(suite: SuiteServer): Promise<void> {
  await suite.restart(3);
  const { documentId, token } = await suite.newDocument();
  const writer = createEditor(suite.server.url, documentId, token, 61);
  await writer.pull();
  let ids = { trackId: "", clipId: "", markerId: "", audioId: "" };
  await writer.edit((session) => (ids = seedTrack(session)));
  const follower = createEditor(suite.server.url, documentId, token, 62);
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
  const store = await suite.factory.open();
  const stored = await store.load(documentId);
  // The seq a server checks before each push (has another server compacted past it?), read alone.
  const snapshotSeq = await store.snapshotSeq?.(documentId);
  const missing = await store.snapshotSeq?.("no-such-document");
  await store.close();
  assert.ok((stored?.snapshotSeq ?? 0) >= 3, `snapshotSeq ${stored?.snapshotSeq}`);
  assert.equal(snapshotSeq, stored?.snapshotSeq);
  assert.equal(missing, undefined);
  await suite.restart();
  const reader = createEditor(suite.server.url, documentId, token, 63);
  await reader.pull();
  assert.deepEqual(
    interpretDocument(reader.doc, timelineSchema),
    interpretDocument(writer.doc, timelineSchema),
  );
}
