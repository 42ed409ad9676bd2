/**
 * Names a caller may legally pass, over real HTTP: document ids a URL cannot carry ("." and "..", which
 * it resolves away) are refused when created; tokens and user ids an HTTP header cannot carry are
 * refused by the client with a typed error that quotes no secret; a document, kind, id or plan named
 * like something a plain object inherits is answered as any other name.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { createTestDatabase } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import { createDocumentClient } from "../src/client/create-document-client.ts";
import { DocumentClientError } from "../src/client/document-client-error.ts";
import { openDocument } from "../src/document/document-session.ts";
import { sampleTimelineSnapshot } from "../src/module/sample-timeline.ts";
import { createPostgresDocumentStore } from "../src/server/postgres/index.ts";
import { type RunningDocumentServer, serveDocuments } from "../src/server/serve-documents.ts";
import { createSqliteDocumentStore } from "../src/server/sqlite-document-store.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";

const directory = mkdtempSync(join(tmpdir(), "docscript-hostile-names-"));
const adminToken = "admin-token-for-hostile-names-0123";
const tokenOf = (documentId: string) => `token-of-${documentId}-0123456789abcdef`;
let server: RunningDocumentServer;

before(async () => {
  server = await serveDocuments({
    store: createSqliteDocumentStore({ path: join(directory, "documents.sqlite") }),
    schema: timelineSchema,
    adminToken,
  });
});
after(async () => {
  await server.close();
  rmSync(directory, { recursive: true, force: true });
});

const createOn = (on: RunningDocumentServer, documentId: string) =>
  createDocumentClient({ origin: on.url, token: adminToken }).createDocument(documentId, {
    adminToken,
    token: tokenOf(documentId),
    snapshot: sampleTimelineSnapshot(),
  });
const create = (documentId: string) => createOn(server, documentId);

test('refuses to create a document "." or ".." (no URL reaches it), and creates "..." and ".a"', async () => {
  for (const documentId of [".", ".."]) {
    await assert.rejects(create(documentId), (error: unknown) => {
      assert.ok(error instanceof DocumentClientError);
      assert.equal(error.code, "invalid_request");
      assert.match(error.message, /neither "\." nor "\.\."/);
      return true;
    });
  }
  for (const documentId of ["...", ".a"]) {
    assert.equal(await create(documentId), true);
    const pulled = await createDocumentClient({ origin: server.url, token: tokenOf(documentId) }).pull(
      documentId,
    );
    assert.equal(pulled.kind, "snapshot");
  }
});

/** Documents, kinds, ids and plans named like inherited properties, answered as any other name. */
async function inheritedNames(on: RunningDocumentServer): Promise<void> {
  for (const documentId of ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf"]) {
    assert.equal(await createOn(on, documentId), true);
    assert.equal(await createOn(on, documentId), false);
    const client = createDocumentClient({ origin: on.url, token: tokenOf(documentId) });
    const { bytes } = await client.pull(documentId);
    const entities = await client.entities(documentId, { kinds: ["constructor", "__proto__", "clip"] });
    assert.deepEqual(
      entities.entities.map((entity) => entity.entityKind),
      ["clip", "clip", "clip"],
    );
    const byId = await client.entities(documentId, { ids: ["__proto__", "constructor"], after: "toString" });
    assert.deepEqual(byId.entities, []);
    const relations = await client.relations(documentId, { kinds: ["__proto__"], endpoint: "constructor" });
    assert.deepEqual(relations.relations, []);
    assert.equal((await client.planState(documentId, "constructor")).state, "unknown");
    const rows = await client.rows(documentId, [
      { rows: "entities", ids: ["__proto__", "constructor"] },
      { members: "entity", kinds: ["constructor"], limit: 5, range: { field: "__proto__", from: 0 } },
      { members: "relation", limit: 5, ordered: { holder: "valueOf", kind: "toString", from: "first" } },
    ]);
    assert.deepEqual(
      rows.results.map((result) => result.rows.length),
      [0, 0, 0],
    );
    // The document is whole: its snapshot reads as the sample.
    const doc = new LoroDoc();
    doc.import(bytes);
    assert.equal(openDocument(doc, timelineSchema).entities.list({ entityKind: "clip" }).length, 3);
  }
}

test("answers documents, kinds, ids and plans named like inherited properties as any other name (SQLite)", () =>
  inheritedNames(server));

test("answers documents, kinds, ids and plans named like inherited properties as any other name (PostgreSQL)", async () => {
  const database = await createTestDatabase("docscript_hostile_names");
  const store = await createPostgresDocumentStore({ connectionString: database.url });
  const running = await serveDocuments({ store, schema: timelineSchema, adminToken });
  try {
    await inheritedNames(running);
  } finally {
    await running.close();
    await database.drop();
  }
});

test("refuses a token a header cannot carry with a typed error that does not quote it", async () => {
  assert.equal(await create("headers"), true);
  for (const token of [
    `${tokenOf("headers")}\n`,
    "secret-token-0123456789\r\nx-evil: 1",
    "jeton-secret-é-用",
  ]) {
    const client = createDocumentClient({ origin: server.url, token });
    await assert.rejects(client.pull("headers"), (error: unknown) => {
      assert.ok(error instanceof DocumentClientError, String(error));
      assert.equal(error.code, "invalid_request");
      assert.equal(error.retryable, false);
      assert.equal(error.message.includes("secret") || error.message.includes(tokenOf("headers")), false);
      return true;
    });
  }
});

test("refuses a user id a header cannot carry when the client is made, and records one it can", async () => {
  for (const userId of ["ann\n", "ann\r\nx-evil: 1", "用户"])
    assert.throws(
      () => createDocumentClient({ origin: server.url, token: tokenOf("headers"), userId }),
      RangeError,
    );
  const client = createDocumentClient({ origin: server.url, token: tokenOf("headers"), userId: "Zoë" });
  const doc = new LoroDoc();
  await client.pullInto("headers", doc);
  const from = doc.oplogVersion();
  openDocument(doc, timelineSchema).entities.create({
    entityKind: "track",
    payload: { role: "bgm", name: "t" },
  });
  doc.commit();
  assert.equal((await client.push("headers", doc.export({ mode: "update", from }))).status, "committed");
  const { changes } = await client.changes("headers");
  assert.equal(changes[0]?.actor, "Zoë");
});

test('refuses plan ids "." and ".." (no URL carries them) instead of calling the document missing', async () => {
  const client = createDocumentClient({ origin: server.url, token: tokenOf("headers") });
  for (const planId of [".", ".."])
    await assert.rejects(client.planState("headers", planId), {
      name: "DocumentClientError",
      code: "invalid_request",
    });
});
