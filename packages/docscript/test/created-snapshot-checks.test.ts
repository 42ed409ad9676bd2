/**
 * `POST /documents` checks its snapshot as a push is checked (ADR 0553), over real HTTP on a SQLite
 * file and on PostgreSQL: a root container the schema does not know is refused with the push check's
 * reason and nothing is created; a snapshot breaking the schema's shapes and field kinds is refused
 * with its issues. A document stored with such a root before the check (by an older version) is
 * served as before: read, pushed to, compacted and reopened, its stored content whole; a push
 * writing that root is rejected as any push is.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createTestDatabase } from "@tackle/test-support";
import { LoroDoc, type LoroMap } from "loro-crdt";
import { createDocumentClient } from "../src/client/create-document-client.ts";
import { projectDocument } from "../src/document/interpret.ts";
import { sampleTimelineSnapshot } from "../src/module/sample-timeline.ts";
import type { DocumentStore } from "../src/server/document-store.ts";
import { hashToken } from "../src/server/index.ts";
import { createPostgresDocumentStore } from "../src/server/postgres/index.ts";
import { appliedPlans } from "../src/server/push-checks.ts";
import { mapsOfRows } from "../src/server/row-containers.ts";
import { allRowChanges } from "../src/server/row-members.ts";
import { serveDocuments } from "../src/server/serve-documents.ts";
import { createSqliteDocumentStore } from "../src/server/sqlite-document-store.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { createDocScriptTool } from "../src/tool/create-doc-script-tool.ts";

const adminToken = "admin-token-created-snapshots-0123";
const hostToken = "host-token-created-snapshots-01234";
const token = "token-created-snapshots-0123456789";

/** The sample timeline with `edit` applied, as a whole snapshot. */
function sampleWith(edit: (doc: LoroDoc) => void): Uint8Array {
  const doc = new LoroDoc();
  doc.import(sampleTimelineSnapshot());
  edit(doc);
  doc.commit();
  return doc.export({ mode: "snapshot" });
}
const withSecrets = (doc: LoroDoc) => doc.getMap("secrets").set("apiKey", "kept-by-an-older-version");
const entityFields = (doc: LoroDoc, id: string) =>
  (doc.getMap("entities").get(id) as LoroMap).get("fields") as LoroMap;

async function createOver(url: string, documentId: string, snapshot: Uint8Array): Promise<Response> {
  return fetch(`${url}/documents`, {
    method: "POST",
    headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
    body: JSON.stringify({ documentId, token, snapshot: Buffer.from(snapshot).toString("base64") }),
  });
}

/** The refusal's code and message, after checking nothing was created under that id. */
async function refused(url: string, documentId: string, snapshot: Uint8Array) {
  const response = await createOver(url, documentId, snapshot);
  assert.equal(response.status, 400);
  const body = (await response.json()) as { error: { code: string; message: string; data: { issues: [] } } };
  const snapshotAnswer = await fetch(`${url}/documents/${documentId}/snapshot`, {
    headers: { authorization: `Bearer ${token}` },
  });
  assert.equal(snapshotAnswer.status, 404, "nothing is created");
  await snapshotAnswer.body?.cancel();
  return body.error;
}

async function refusesUnknownContent(store: DocumentStore): Promise<void> {
  const server = await serveDocuments({ store, schema: timelineSchema, adminToken });
  try {
    const secrets = await refused(server.url, "with-secrets", sampleWith(withSecrets));
    assert.equal(secrets.code, "invalid_snapshot");
    assert.match(secrets.message, /root container "secrets", which the mapping does not know/);
    // `entities` as a list is not the mapping's `entities` map: a push writing it is refused alike.
    const list = await refused(
      server.url,
      "entities-list",
      sampleWith((doc) => doc.getList("entities").insert(0, "row")),
    );
    assert.equal(list.code, "invalid_snapshot");
    assert.match(list.message, /root container "entities \(written as something other than a map\)"/);
    // Written and taken out again: the history still writes it, as a push's would.
    const gone = await refused(
      server.url,
      "secrets-deleted",
      sampleWith((doc) => {
        withSecrets(doc);
        doc.commit();
        doc.getMap("secrets").delete("apiKey");
      }),
    );
    assert.match(gone.message, /root container "secrets"/);
    // Shapes and field kinds: the projection's check, the one a push's rows pass.
    const kind = await refused(
      server.url,
      "muted-text",
      sampleWith((doc) => entityFields(doc, "track-1").set("muted", "yes")),
    );
    assert.equal(kind.code, "document_invalid");
    assert.match(kind.message, /track-1/);
    const shallow = new LoroDoc();
    shallow.import(sampleTimelineSnapshot());
    const shallowed = await refused(
      server.url,
      "shallow",
      shallow.export({ mode: "shallow-snapshot", frontiers: shallow.frontiers() }),
    );
    assert.match(shallowed.message, /shallow snapshot/);
    // The sample itself, and `meta` (the mapping's own root), are created.
    const ok = await createOver(
      server.url,
      "with-meta",
      sampleWith((doc) => doc.getMap("meta").set("a", 1)),
    );
    assert.equal(ok.status, 201);
  } finally {
    await server.close();
  }
}

/** A document with a root the schema does not know, written as an older version's create wrote it. */
async function storeAsBefore(store: DocumentStore, documentId: string): Promise<void> {
  const doc = new LoroDoc();
  doc.import(sampleWith(withSecrets));
  const projection = projectDocument(doc, timelineSchema);
  const created = await store.createDocument({
    documentId,
    tokenHash: hashToken(token),
    snapshot: doc.export({ mode: "snapshot" }),
    snapshotVersion: doc.oplogVersion().encode(),
    rows: allRowChanges(projection, mapsOfRows(doc)),
    issues: [],
    plans: appliedPlans(doc),
  });
  assert.equal(created, true);
}

const secretOf = (bytes: Uint8Array) => {
  const doc = new LoroDoc();
  doc.import(bytes);
  return doc.getMap("secrets").get("apiKey");
};

async function servesStoredAsBefore(open: () => Promise<DocumentStore>): Promise<void> {
  const documentId = "stored-before";
  const first = await open();
  await storeAsBefore(first, documentId);
  const server = await serveDocuments({
    store: first,
    schema: timelineSchema,
    adminToken,
    hostTokens: [hostToken],
    compactEvery: 1,
  });
  const client = createDocumentClient({ origin: server.url, token });
  try {
    const pulled = await client.pull(documentId);
    assert.equal(secretOf(pulled.bytes), "kept-by-an-older-version");
    const page = await client.entities(documentId, { kinds: ["track"] });
    assert.deepEqual(
      page.entities.map((entity) => entity.entityId),
      ["track-1", "track-2", "track-3"],
    );
    const replica = new LoroDoc();
    replica.import(pulled.bytes);
    const from = replica.oplogVersion();
    entityFields(replica, "track-1").set("name", "Renamed");
    replica.commit();
    const renamed = await client.push(documentId, replica.export({ mode: "update", from }));
    assert.equal(renamed.status, "committed");
    // Writing the unknown root is rejected, as for any document.
    const again = replica.oplogVersion();
    replica.getMap("secrets").set("apiKey", "changed");
    replica.commit();
    const secret = await client.push(documentId, replica.export({ mode: "update", from: again }));
    assert.equal(secret.status, "rejected");
    assert.match(
      secret.status === "rejected" ? secret.reasons.join(" ") : "",
      /root container "secrets", which the mapping does not know/,
    );
    // The tool's runs: its snapshot, a script and its plan's commit, as on any document.
    const tool = createDocScriptTool({
      httpOrigin: server.url,
      authToken: hostToken,
      userId: "user-1",
      authorize: (docId: string) => docId === documentId,
    });
    try {
      const snapshot = await tool.handle({ op: "snapshot", doc_id: documentId });
      assert.ok(snapshot.ok, JSON.stringify(snapshot));
      const run = await tool.handle({
        op: "run-edit-script",
        doc_id: documentId,
        script: `entities.update('track-2', [{ op: 'set', path: ['volume'], value: -6 }]);`,
      });
      assert.ok(run.ok && run.op === "run-edit-script", JSON.stringify(run));
      const commit = await tool.handle({ op: "commit-plan", doc_id: documentId, plan_id: run.plan_id });
      assert.equal(
        commit.ok && commit.op === "commit-plan" && commit.status,
        "committed",
        JSON.stringify(commit),
      );
    } finally {
      await tool.close();
    }
    // The change log (history) lists both stored pushes, the rejected one not at all.
    const log = await client.changes(documentId);
    assert.deepEqual(
      log.changes.map((change) => [change.seq, change.status, change.credential]),
      [
        [2, "committed", "host"],
        [1, "committed", "document"],
      ],
    );
  } finally {
    await server.close();
  }
  // Reopened (compacted after each push): the content stored before the check is all there.
  const second = await open();
  assert.equal((await second.load(documentId))?.updates.length, 0, "compacted");
  const reopened = await serveDocuments({ store: second, schema: timelineSchema, adminToken });
  try {
    const reader = createDocumentClient({ origin: reopened.url, token });
    const bytes = (await reader.pull(documentId)).bytes;
    assert.equal(secretOf(bytes), "kept-by-an-older-version");
    const [track] = (await reader.entities(documentId, { ids: ["track-1"] })).entities;
    assert.equal(track?.payload.name, "Renamed");
    const [music] = (await reader.entities(documentId, { ids: ["track-2"] })).entities;
    assert.equal(music?.payload.volume, -6);
  } finally {
    await reopened.close();
  }
}

describe("created snapshots are checked as pushes (ADR 0553)", () => {
  const directory = mkdtempSync(join(tmpdir(), "tackle-docscript-created-"));
  const databases: { drop(): Promise<void> }[] = [];
  after(async () => {
    rmSync(directory, { recursive: true, force: true });
    for (const database of databases) await database.drop();
  });
  const postgres = async (label: string) => {
    const database = await createTestDatabase(`docscript_created_${label}`);
    databases.push(database);
    return () => createPostgresDocumentStore({ connectionString: database.url });
  };

  it("refuses a snapshot holding what a push may not write, nothing created (SQLite)", async () => {
    await refusesUnknownContent(createSqliteDocumentStore({ path: join(directory, "refuses.sqlite") }));
  });
  it("refuses a snapshot holding what a push may not write, nothing created (PostgreSQL)", async () => {
    await refusesUnknownContent(await (await postgres("refuses"))());
  });
  it("serves a document stored with an unknown root before the check, losing nothing (SQLite)", async () => {
    const path = join(directory, "stored.sqlite");
    await servesStoredAsBefore(async () => createSqliteDocumentStore({ path }));
  });
  it("serves a document stored with an unknown root before the check, losing nothing (PostgreSQL)", async () => {
    await servesStoredAsBefore(await postgres("stored"));
  });
});
