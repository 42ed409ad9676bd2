/**
 * Opening a document whose snapshot is followed by a log: the first page a fresh server answers holds
 * every logged update, at the version the snapshot and the whole log make (issue 25, point 4).
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, test } from "node:test";
import { LoroDoc } from "loro-crdt";
import { openDocument } from "../document/document-session.ts";
import { encodeVersion, sameVersion } from "../document/version.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { DocumentHost } from "./document-host.ts";
import type { DocumentStore } from "./document-store.ts";
import { createSqliteDocumentStore } from "./sqlite-document-store.ts";

const directory = await mkdtemp(join(tmpdir(), "docscript-open-with-log-"));
after(() => rm(directory, { recursive: true, force: true }));

const never = { compactEvery: 1_000_000, compactLogBytes: 2 ** 40, compactAgeMs: 1e12 };
const token = "token-0123456789abcdef";

/** A document of `count` captions, stored as its snapshot; and a replica of it. */
async function captions(host: DocumentHost, documentId: string, count: number) {
  const seed = new LoroDoc();
  const session = openDocument(seed, timelineSchema);
  const ids: string[] = [];
  for (let index = 0; index < count; index++)
    ids.push(
      session.entities.create({ entityKind: "caption", payload: { text: `caption ${index}` } }).entityId,
    );
  seed.commit();
  assert.equal(await host.create(documentId, token, seed.export({ mode: "snapshot" })), true);
  return { replica: LoroDoc.fromSnapshot((await host.snapshot(documentId)).bytes), ids };
}

/** One update: a caption's text set to `text`. */
function retitle(replica: LoroDoc, id: string, text: string): Uint8Array {
  const before = replica.oplogVersion();
  openDocument(replica, timelineSchema).entities.update(id, [{ op: "set", path: ["text"], value: text }]);
  replica.commit();
  return replica.export({ mode: "update", from: before });
}

/** The first page a fresh server on `path` answers, with every caption's text in it. */
async function firstPage(path: string, documentId: string) {
  const store = createSqliteDocumentStore({ path });
  const host = new DocumentHost({ store, schema: timelineSchema, ...never });
  try {
    const page = await host.entityPage(documentId, { limit: 100 });
    const texts = new Map(page.entities.map((entity) => [entity.entityId, entity.payload.text]));
    return { page, texts };
  } finally {
    await host.close();
    await store.close();
  }
}

async function logLength(store: DocumentStore, documentId: string): Promise<number> {
  return (await store.load(documentId))?.updates.length ?? -1;
}

/** How many snapshots `work` imports into a Loro document (a document loaded). */
async function snapshotsRead<T>(work: () => Promise<T>): Promise<{ result: T; snapshots: number }> {
  const statics = LoroDoc as unknown as { fromSnapshot: (bytes: Uint8Array) => LoroDoc };
  const original = statics.fromSnapshot;
  let snapshots = 0;
  statics.fromSnapshot = (bytes) => {
    snapshots++;
    return original.call(LoroDoc, bytes);
  };
  try {
    return { result: await work(), snapshots };
  } finally {
    statics.fromSnapshot = original;
  }
}

test("the first page after opening with a log shows every logged update, at the log's version, unloaded", async () => {
  const path = join(directory, "pushed.db");
  const store = createSqliteDocumentStore({ path });
  const host = new DocumentHost({ store, schema: timelineSchema, ...never });
  const { replica, ids } = await captions(host, "doc", 30);
  // Two peers in turn, each update its own push: the first, the last and each in between logged.
  const other = LoroDoc.fromSnapshot(replica.export({ mode: "snapshot" }));
  for (const [index, id] of ids.entries()) {
    const [writer, reader] = index % 3 === 0 ? [other, replica] : [replica, other];
    const update = retitle(writer, id, `logged ${index}`);
    reader.import(update);
    const result = await host.push("doc", update);
    assert.equal(result.status, "committed", JSON.stringify(result));
  }
  await host.close();
  assert.equal(await logLength(store, "doc"), ids.length, "the updates stay in the log");
  await store.close();

  const { result, snapshots } = await snapshotsRead(() => firstPage(path, "doc"));
  const { page, texts } = result;
  for (const [index, id] of ids.entries()) assert.equal(texts.get(id), `logged ${index}`, id);
  assert.equal(page.total.entities, ids.length);
  assert.ok(
    sameVersion(page.version, encodeVersion(replica.oplogVersion())),
    "the page is at the version of the snapshot and every logged update",
  );
  assert.equal(snapshots, 0, "the page is the store's: the document is not loaded for it");
});

test("a snapshot stored without its version is loaded for the first page, and keeps its version for the next", async () => {
  const path = join(directory, "unversioned.db");
  const store = createSqliteDocumentStore({ path });
  const host = new DocumentHost({ store, schema: timelineSchema, ...never });
  const { replica, ids } = await captions(host, "doc", 5);
  for (const [index, id] of ids.entries()) await host.push("doc", retitle(replica, id, `logged ${index}`));
  await host.close();
  await store.close();
  // As a document stored before migration 8 left it.
  const database = new DatabaseSync(path);
  database.exec("UPDATE docscript_documents SET snapshot_version = NULL");
  database.close();

  const first = await snapshotsRead(() => firstPage(path, "doc"));
  assert.equal(first.snapshots, 1, "no stored version: the document is loaded");
  const second = await snapshotsRead(() => firstPage(path, "doc"));
  assert.equal(second.snapshots, 0, "the load kept the snapshot's version");
  for (const { result } of [first, second]) {
    assert.ok(sameVersion(result.page.version, encodeVersion(replica.oplogVersion())));
    for (const [index, id] of ids.entries()) assert.equal(result.texts.get(id), `logged ${index}`);
  }
});

test("the first page shows logged updates whose rows another server left behind", async () => {
  const path = join(directory, "behind.db");
  const store = createSqliteDocumentStore({ path });
  const host = new DocumentHost({ store, schema: timelineSchema, ...never });
  const { replica, ids } = await captions(host, "doc", 12);
  await host.close();
  // Appended without rows (as a server that stores an update and fails before its rows): the rows
  // hold through seq 0 while the log holds 12 updates.
  for (const [index, id] of ids.entries())
    await store.append({
      documentId: "doc",
      seq: index + 1,
      bytes: retitle(replica, id, `behind ${index}`),
      status: "committed",
    });
  assert.equal(await store.rowsSeq("doc"), 0);
  await store.close();

  const { page, texts } = await firstPage(path, "doc");
  for (const [index, id] of ids.entries()) assert.equal(texts.get(id), `behind ${index}`, id);
  assert.ok(sameVersion(page.version, encodeVersion(replica.oplogVersion())));
});
