/**
 * A push large beside its document is not imported into the live document again: the fork it was
 * checked in becomes the live document, and the next push is checked in a fork of that (ADR 0496).
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { decodeImportBlobMeta, LoroDoc, LoroMap } from "loro-crdt";
import { captions, write } from "../../test/push-writes.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { spansOfUpdate } from "./changed-rows.ts";
import { DocumentHost } from "./document-host.ts";
import { forkTakesOver } from "./open-document.ts";
import { createSqliteDocumentStore } from "./sqlite-document-store.ts";

const directory = await mkdtemp(join(tmpdir(), "docscript-fork-takes-over-"));
after(() => rm(directory, { recursive: true, force: true }));
const token = "token-0123456789abcdef";

test("an update large beside the document's history takes the fork's place; a small one is imported", () => {
  const doc = new LoroDoc();
  const large = write(doc, captions(200, "caption"));
  assert.equal(forkTakesOver(doc, spansOfUpdate(decodeImportBlobMeta(large, true))), true);
  const small = write(doc, captions(1, "one more"));
  assert.equal(forkTakesOver(doc, spansOfUpdate(decodeImportBlobMeta(small, true))), false);
  // Past 1,024 atoms, but a sliver of a long history (each character an atom): imported.
  write(doc, (written) => written.getText("history").insert(0, "x".repeat(1_000_000)));
  const medium = write(doc, captions(200, "medium"));
  assert.equal(forkTakesOver(doc, spansOfUpdate(decodeImportBlobMeta(medium, true))), false);
});

test("after a large push the live document is the fork: later pushes are checked, refused and stored as before", async () => {
  const path = join(directory, "doc.sqlite");
  const store = createSqliteDocumentStore({ path });
  const host = new DocumentHost({ store, schema: timelineSchema });
  await host.create("doc", token);
  const replica = new LoroDoc();
  replica.setPeerId(7);
  const large = write(replica, captions(200, "caption"));
  assert.equal((await host.push("doc", large)).status, "committed");
  // A push that breaks the schema, checked in a fork of the live document, is refused and leaves it as it was.
  const other = replica.fork();
  other.setPeerId(8);
  const bad = write(other, (doc) => {
    const row = doc.getMap("entities").setContainer("caption-bad", new LoroMap());
    row.set("kind", "caption");
    row.setContainer("fields", new LoroMap()).set("text", 42);
  });
  assert.equal((await host.push("doc", bad)).status, "rejected");
  const small = write(replica, captions(1, "after"));
  assert.equal((await host.push("doc", small)).status, "committed");
  const last = write(replica, captions(1, "last"));
  assert.equal((await host.push("doc", last)).status, "committed");
  // The live document holds every stored push and nothing refused; so does the store.
  const { bytes } = await host.snapshot("doc");
  assert.deepEqual(LoroDoc.fromSnapshot(bytes).toJSON(), replica.toJSON());
  await host.close();
  const reopened = new DocumentHost({ store, schema: timelineSchema });
  const page = await reopened.entityPage("doc", { kinds: ["caption"], limit: 500 });
  assert.equal(page.entities.length, 202);
  assert.deepEqual(LoroDoc.fromSnapshot((await reopened.snapshot("doc")).bytes).toJSON(), replica.toJSON());
  await reopened.close();
  await store.close();
});
