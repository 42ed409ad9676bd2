/** Host-only fields are enforced by the server by credential: only a host token's push may set them. */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { LoroDoc, type LoroMap } from "loro-crdt";
import { createDocumentClient } from "../src/client/create-document-client.ts";
import { interpretDocument } from "../src/document/interpret.ts";
import { sampleTimelineSnapshot } from "../src/module/sample-timeline.ts";
import { serveDocuments } from "../src/server/serve-documents.ts";
import { createSqliteDocumentStore } from "../src/server/sqlite-document-store.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";

test("a push that sets storageKey or digest is rejected unless its credential is a host's; nothing is stored", async () => {
  const directory = mkdtempSync(join(tmpdir(), "docscript-host-only-"));
  const adminToken = "admin-token-for-tests-0123456789";
  const token = "document-token-for-tests-0123456789";
  const hostToken = "host-token-for-tests-0123456789";
  const server = await serveDocuments({
    store: createSqliteDocumentStore({ path: join(directory, "documents.sqlite") }),
    schema: timelineSchema,
    adminToken,
    hostTokens: [hostToken],
  });
  try {
    const user = createDocumentClient({ origin: server.url, token });
    const host = createDocumentClient({ origin: server.url, token: hostToken });
    await user.createDocument("doc", { adminToken, token, snapshot: sampleTimelineSnapshot() });
    const read = async () => {
      const doc = new LoroDoc();
      await user.pullInto("doc", doc);
      return doc;
    };
    const before = await read();
    const medium = interpretDocument(before, timelineSchema).entities.find(
      (entity) => "storageKey" in entity.payload,
    )!;
    const edit = async (field: string, value: string) => {
      const doc = await read();
      const from = doc.oplogVersion();
      ((doc.getMap("entities").get(medium.entityId) as LoroMap).get("fields") as LoroMap).set(field, value);
      doc.commit();
      return doc.export({ mode: "update", from });
    };
    for (const field of ["storageKey", "digest"]) {
      const pushed = await user.push("doc", await edit(field, "forged"));
      assert.equal(pushed.status, "rejected", JSON.stringify(pushed));
      assert.ok(
        pushed.status === "rejected" &&
          pushed.reasons.some((reason) => reason.includes(`${medium.entityId}.${field}`)),
      );
    }
    const unchanged = await read();
    assert.deepEqual(unchanged.oplogVersion().toJSON(), before.oplogVersion().toJSON(), "nothing was stored");
    // Any other field: fine for the document's token.
    const named = await user.push("doc", await edit("name", "Renamed"));
    assert.equal(named.status, "committed");
    // The host's credential opens the document and may set host-only fields.
    const hosted = await host.push("doc", await edit("storageKey", "store/real"));
    assert.equal(hosted.status, "committed", JSON.stringify(hosted));
    const after = interpretDocument(await read(), timelineSchema).entities.find(
      (entity) => entity.entityId === medium.entityId,
    );
    assert.equal(after?.payload.storageKey, "store/real");
    assert.equal(after?.payload.name, "Renamed");
  } finally {
    await server.close();
    rmSync(directory, { recursive: true, force: true });
  }
});
