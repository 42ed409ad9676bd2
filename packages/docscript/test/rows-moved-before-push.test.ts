/**
 * Two document servers on one SQLite file (no lock across them): a push through one, caught up with
 * the other's update, found the store's rows moved on again by the other's next push while it read the
 * document's issues from them. It failed 500 ("the rows of … hold through 3, not 2"); a push whose
 * judging met the same is read afresh and judged again, and so is this one now. Found by
 * `concurrent-editors.property.test.ts` (seed 2002).
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { openDocument, timelineSchema } from "../src/index.ts";
import { sampleTimelineSnapshot } from "../src/module/sample-timeline.ts";
import { DocumentHost } from "../src/server/document-host.ts";
import type { DocumentStore } from "../src/server/document-store.ts";
import { createSqliteDocumentStore } from "../src/server/sqlite-document-store.ts";

const directory = await mkdtemp(join(tmpdir(), "docscript-rows-moved-"));
after(() => rm(directory, { recursive: true, force: true }));
const token = "token-rows-moved-0123456789";

/** A caption created on `base` (a snapshot), as one update. */
function captionUpdate(base: Uint8Array, text: string, peer: number): Uint8Array {
  const doc = LoroDoc.fromSnapshot(base);
  doc.setPeerId(peer);
  const from = doc.oplogVersion();
  openDocument(doc, timelineSchema).entities.create({ entityKind: "caption", payload: { text } });
  doc.commit();
  return doc.export({ mode: "update", from });
}

it("a push whose catch-up meets another server's next push is judged again, not failed", async () => {
  const path = join(directory, "documents.sqlite");
  const storeB = createSqliteDocumentStore({ path });
  const hostB = new DocumentHost({ store: storeB, schema: timelineSchema });
  // A's store: once armed, its next catch-up read lets B store another push before it answers.
  const storeA = createSqliteDocumentStore({ path });
  let meanwhile: (() => Promise<void>) | undefined;
  const watched: DocumentStore = new Proxy(storeA, {
    get(target, name, receiver) {
      if (name !== "updatesAfter") return Reflect.get(target, name, receiver);
      return async (documentId: string, seq: number) => {
        const found = await target.updatesAfter(documentId, seq);
        const run = meanwhile;
        meanwhile = undefined;
        if (found.length > 0 && run !== undefined) await run();
        return found;
      };
    },
  });
  const hostA = new DocumentHost({ store: watched, schema: timelineSchema });
  try {
    const base = sampleTimelineSnapshot();
    assert.equal(await hostB.create("doc", token, base), true);
    // A holds the document open, at seq 0.
    await hostA.snapshot("doc");
    assert.equal((await hostB.push("doc", captionUpdate(base, "first through B", 11))).status, "committed");
    meanwhile = async () => {
      const second = await hostB.push("doc", captionUpdate(base, "second through B", 12));
      assert.equal(second.status, "committed");
    };
    const pushed = await hostA.push("doc", captionUpdate(base, "through A", 13));
    assert.equal(meanwhile, undefined, "B pushed while A caught up");
    assert.equal(pushed.status, "committed", JSON.stringify(pushed));
    // Both servers hand out all three captions.
    for (const host of [hostA, hostB]) {
      const texts = openDocument(LoroDoc.fromSnapshot((await host.snapshot("doc")).bytes), timelineSchema)
        .entities.list({ entityKind: "caption" })
        .map((entity) => String(entity.payload.text));
      for (const text of ["first through B", "second through B", "through A"])
        assert.ok(texts.includes(text), `${text} in ${JSON.stringify(texts)}`);
    }
  } finally {
    await hostA.close();
    await hostB.close();
    await storeA.close();
    await storeB.close();
  }
});
