import assert from "node:assert/strict";
import { it } from "node:test";
import { LoroDoc, type LoroMap } from "loro-crdt";
import { sampleTimelineSnapshot } from "../module/sample-timeline.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { DocumentHost } from "../server/document-host.ts";
import { createSqliteDocumentStore } from "../server/sqlite-document-store.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { documentVersion } from "./document-cache.ts";
import { remoteProjection } from "./remote-projection.ts";

it("reads what a lookup lacked from the server's rows, and refuses an answer at another version", async () => {
  const host = new DocumentHost({
    store: createSqliteDocumentStore({ path: ":memory:" }),
    schema: timelineSchema,
  });
  try {
    await host.create("doc", "token-0123456789abcdef", sampleTimelineSnapshot());
    const replica = LoroDoc.fromSnapshot((await host.snapshot("doc")).bytes);
    const projection = remoteProjection(
      timelineSchema,
      (lookups) => host.rowLookup("doc", lookups),
      documentVersion(replica),
      20_000,
    );
    // Nothing held: the lookup is answered "absent" and recorded as lacking.
    assert.equal(projection.entity("track-1"), undefined);
    assert.equal(projection.lacking, true);
    await projection.remote.fill();
    assert.equal(projection.lacking, false);
    assert.equal(projection.entity("track-1")?.entityKind, "track");
    // Its relations came with it (a short page): answered without another request.
    const requests = projection.remote.requests;
    assert.ok(projection.relationsOf("track-1").length > 0);
    assert.equal(projection.lacking, false);
    assert.equal(projection.remote.requests, requests);

    // Another peer's push moves the server on: the next answer is refused, naming the change.
    const other = LoroDoc.fromSnapshot((await host.snapshot("doc")).bytes);
    other.setPeerId(9);
    const before = other.oplogVersion();
    ((other.getMap("entities").get("track-1") as LoroMap).get("fields") as LoroMap).set("volume", -3);
    other.commit();
    assert.equal(
      (await host.push("doc", other.export({ mode: "update", from: before }))).status,
      "committed",
    );
    assert.equal(projection.entity("track-2"), undefined);
    await assert.rejects(
      projection.remote.fill(),
      (error: unknown) => DocScriptError.isInstance(error) && error.code === "document_changed",
    );
    assert.notEqual(projection.remote.movedTo, undefined);
  } finally {
    await host.close();
  }
});
