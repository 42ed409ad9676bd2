/**
 * What a document copy's first import pays is paid by reads before a request waits (ADR 0504): the
 * server readies the next push's replica and its live document once a read of the document is
 * answered, and a ready copy holds exactly what it held.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { LoroDoc, LoroMap } from "loro-crdt";
import { captions, write } from "../../test/push-writes.ts";
import { isReadyForImports, readyForImports } from "../document/ready-for-imports.ts";
import { encodeVersion } from "../document/version.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { DocumentHost } from "./document-host.ts";
import type { OpenDocument } from "./open-document.ts";
import { createSqliteDocumentStore } from "./sqlite-document-store.ts";

const directory = await mkdtemp(join(tmpdir(), "docscript-ready-before-push-"));
after(() => rm(directory, { recursive: true, force: true }));
const token = "token-0123456789abcdef";

/** The host's open document (its fields are the server's own; read here to see what was readied). */
function openOf(host: DocumentHost, documentId: string): OpenDocument | undefined {
  return (host as unknown as { docs: { open: Map<string, OpenDocument> } }).docs.open.get(documentId);
}

/** Waits until what was queued once the last call was answered has run. */
async function settled(host: DocumentHost, documentId: string): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  await host.planState(documentId, "plan-none");
}

test("a ready copy holds what it held: no op written, the same version and values", () => {
  const doc = new LoroDoc();
  write(doc, captions(3, "caption"));
  const version = doc.oplogVersion();
  const json = doc.toJSON();
  const empty = doc.export({ mode: "update", from: version });
  assert.equal(isReadyForImports(doc), false);
  readyForImports(doc);
  assert.equal(isReadyForImports(doc), true);
  assert.equal(encodeVersion(doc.oplogVersion()), encodeVersion(version));
  assert.deepEqual(doc.export({ mode: "update", from: version }), empty);
  assert.deepEqual(doc.toJSON(), json);
  // It takes updates as any copy does.
  const other = LoroDoc.fromSnapshot(doc.export({ mode: "snapshot" }));
  readyForImports(other);
  doc.import(write(other, captions(1, "more")));
  assert.deepEqual(doc.toJSON(), other.toJSON());
});

test("after a read the next push's replica is made and ready; pushes are checked, refused and stored as before", async () => {
  const store = createSqliteDocumentStore({ path: join(directory, "doc.sqlite") });
  // 0: every stored push's fork becomes the live document, so the next replica is a fork (ADR 0496).
  const host = new DocumentHost({ store, schema: timelineSchema, forkTakesOverAtoms: 0 });
  await host.create("doc", token);
  const replica = LoroDoc.fromSnapshot((await host.snapshot("doc")).bytes);
  replica.setPeerId(7);
  await settled(host, "doc");
  const opened = openOf(host, "doc");
  assert.ok(opened?.shadow !== undefined, "a replica was made once the snapshot was answered");
  assert.ok(isReadyForImports(opened.doc) && isReadyForImports(opened.shadow));

  assert.equal((await host.push("doc", write(replica, captions(20, "caption")))).status, "committed");
  assert.equal(openOf(host, "doc")?.shadow, undefined, "the push's fork is the live document");
  await host.updatesSince("doc", encodeVersion(replica.oplogVersion()));
  await settled(host, "doc");
  const pulled = openOf(host, "doc");
  assert.ok(pulled?.shadow !== undefined, "a fork was made once the pull was answered");
  assert.ok(isReadyForImports(pulled.doc) && isReadyForImports(pulled.shadow));
  assert.equal(pulled.shadow.cmpFrontiers(pulled.shadow.frontiers(), pulled.doc.frontiers()), 0);

  // A push that breaks the schema is refused in the readied replica and leaves nothing behind.
  const other = replica.fork();
  other.setPeerId(8);
  const bad = write(other, (doc) => {
    const row = doc.getMap("entities").setContainer("caption-bad", new LoroMap());
    row.set("kind", "caption");
    row.setContainer("fields", new LoroMap()).set("text", 42);
  });
  assert.equal((await host.push("doc", bad)).status, "rejected");
  await host.updatesSince("doc", encodeVersion(replica.oplogVersion()));
  await settled(host, "doc");
  assert.ok(openOf(host, "doc")?.shadow !== undefined, "made anew after the refusal");
  assert.equal((await host.push("doc", write(replica, captions(1, "after")))).status, "committed");
  assert.deepEqual(LoroDoc.fromSnapshot((await host.snapshot("doc")).bytes).toJSON(), replica.toJSON());
  await host.close();
  const reopened = new DocumentHost({ store, schema: timelineSchema });
  assert.equal((await reopened.entityPage("doc", { kinds: ["caption"], limit: 100 })).entities.length, 21);
  await reopened.close();
  await store.close();
});

test("a readied replica is dropped when the live document takes another server's push: the next push is not refused", async () => {
  const path = join(directory, "two-servers.sqlite");
  const storeA = createSqliteDocumentStore({ path });
  const storeB = createSqliteDocumentStore({ path });
  const hostA = new DocumentHost({ store: storeA, schema: timelineSchema });
  const hostB = new DocumentHost({ store: storeB, schema: timelineSchema });
  await hostA.create("doc", token);
  const replica = LoroDoc.fromSnapshot((await hostA.snapshot("doc")).bytes);
  replica.setPeerId(9);
  await settled(hostA, "doc");
  const readied = openOf(hostA, "doc")?.shadow;
  assert.ok(readied !== undefined, "server A readied its next push's replica");
  // Server B stores a push; server A's readied replica does not hold it.
  assert.equal((await hostB.push("doc", write(replica, captions(2, "on B")))).status, "committed");
  // A push that depends on it, sent to server A before anything else asks A.
  const result = await hostA.push("doc", write(replica, captions(1, "on A")));
  assert.equal(result.status, "committed", JSON.stringify(result));
  assert.notEqual(openOf(hostA, "doc")?.shadow, readied, "the push was not judged in the stale replica");
  assert.deepEqual(LoroDoc.fromSnapshot((await hostA.snapshot("doc")).bytes).toJSON(), replica.toJSON());
  await hostA.close();
  await hostB.close();
  await storeA.close();
  await storeB.close();
});
