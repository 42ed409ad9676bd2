/** The log is compacted by its size and age as well as its length, and when a document opens with a long log. */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { LoroDoc } from "loro-crdt";
import { openDocument } from "../document/document-session.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { DocumentHost } from "./document-host.ts";
import type { DocumentStore } from "./document-store.ts";
import { createSqliteDocumentStore } from "./sqlite-document-store.ts";

const directory = await mkdtemp(join(tmpdir(), "docscript-compaction-"));
after(() => rm(directory, { recursive: true, force: true }));

/** Pushes one caption with `text` through `host`, made on what `replica` holds; returns the new seq's log length. */
async function pushCaption(host: DocumentHost, replica: LoroDoc, documentId: string, text: string) {
  const before = replica.oplogVersion();
  openDocument(replica, timelineSchema).entities.create({ entityKind: "caption", payload: { text } });
  replica.commit();
  const result = await host.push(documentId, replica.export({ mode: "update", from: before }));
  assert.equal(result.status, "committed", JSON.stringify(result));
}

async function logLength(store: DocumentStore, documentId: string): Promise<number> {
  return (await store.load(documentId))?.updates.length ?? -1;
}

test("a log past its byte bound, or older than its age bound, is compacted though it holds few updates", async () => {
  const store = createSqliteDocumentStore({ path: join(directory, "bounds.db") });
  const bySize = new DocumentHost({ store, schema: timelineSchema, compactLogBytes: 1500 });
  await bySize.create("size", "token-0123456789abcdef");
  const replica = new LoroDoc();
  await pushCaption(bySize, replica, "size", "short");
  await bySize.close();
  assert.equal(await logLength(store, "size"), 1, "one small update stays in the log");
  // Text that does not compress: each update is some 450 bytes.
  const noise = () =>
    Array.from({ length: 400 }, () => "abcdefghijklmnopqrstuvwxyz"[Math.floor(Math.random() * 26)]).join("");
  for (let index = 0; index < 4; index++) await pushCaption(bySize, replica, "size", noise());
  await bySize.close();
  const stored = await store.load("size");
  assert.ok((stored?.snapshotSeq ?? 0) >= 3, "past 1,500 bytes the log was compacted");
  assert.ok((stored?.updates.length ?? 9) <= 2, `what followed the compaction: ${stored?.updates.length}`);

  const byAge = new DocumentHost({ store, schema: timelineSchema, compactAgeMs: 50 });
  await byAge.create("age", "token-0123456789abcdef");
  const other = new LoroDoc();
  await pushCaption(byAge, other, "age", "first");
  // The host stays open: a log's age is counted from its oldest update seen by this host (a host that
  // opens a document with a log counts from the open; the log holds no times).
  assert.equal(await logLength(store, "age"), 1);
  await new Promise((resolve) => setTimeout(resolve, 100));
  await pushCaption(byAge, other, "age", "second");
  await byAge.close();
  assert.equal(await logLength(store, "age"), 0, "the log's oldest update was past 50 ms");
  await store.close();
});

test("a document that opens with a log past its bounds is compacted after its first answer", async () => {
  const path = join(directory, "open.db");
  const writerStore = createSqliteDocumentStore({ path });
  const writer = new DocumentHost({ store: writerStore, schema: timelineSchema, compactEvery: 1000 });
  await writer.create("long", "token-0123456789abcdef");
  const replica = new LoroDoc();
  for (let index = 0; index < 12; index++) await pushCaption(writer, replica, "long", `caption ${index}`);
  await writer.close();
  await writerStore.close();
  const store = createSqliteDocumentStore({ path });
  assert.equal(await logLength(store, "long"), 12);
  const reader = new DocumentHost({ store, schema: timelineSchema, compactEvery: 10 });
  const page = await reader.entityPage("long", { limit: 5 });
  assert.equal(page.total.entities, 12);
  await reader.close();
  assert.equal(await logLength(store, "long"), 0, "opened with 12 updates past a bound of 10: compacted");
  await store.close();
});
