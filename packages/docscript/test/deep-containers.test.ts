/**
 * A push or a new document whose containers nest thousands deep is refused from its ops, before any
 * row is read: Loro reads a row's value recursively inside its WebAssembly module, and at ~4,000 levels
 * that read fails with "memory access out of bounds" and breaks Loro for every document the process
 * holds. The server must answer the attacker and go on serving everyone else.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { LoroDoc, LoroMap } from "loro-crdt";
import { interpretDocument } from "../src/document/interpret.ts";
import { sampleTimelineSnapshot } from "../src/module/sample-timeline.ts";
import { maxContainerDepth } from "../src/server/push-checks.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { withSampleServer } from "./timeline-fixture.ts";

/** Well past the ~4,000 levels at which Loro's recursive read breaks the module. */
const levels = 5000;

const fieldsOf = (doc: LoroDoc, entityId: string): LoroMap =>
  (doc.getMap("entities").get(entityId) as LoroMap).get("fields") as LoroMap;

const trackOf = (doc: LoroDoc): string =>
  interpretDocument(doc, timelineSchema).entities.find((entity) => entity.entityKind === "track")!.entityId;

/** Nests `levels` maps under `map[key]`, written straight into Loro as a hostile client would. */
function nest(map: LoroMap, key: string, depth: number): void {
  let current = map.setContainer(key, new LoroMap());
  for (let level = 1; level < depth; level++) current = current.setContainer("n", new LoroMap());
}

test("containers nested thousands deep are refused before any read, and the server goes on serving", () =>
  withSampleServer(async ({ client, adminToken, token, read }) => {
    const before = await read();
    const track = trackOf(before);

    const hostile = await read();
    const from = hostile.oplogVersion();
    nest(fieldsOf(hostile, track), "name", levels);
    hostile.commit();
    const pushed = await client.push("doc", hostile.export({ mode: "update", from }));
    assert.equal(pushed.status, "rejected", JSON.stringify(pushed).slice(0, 300));
    assert.match(
      (pushed as { reasons: readonly string[] }).reasons.join(" "),
      new RegExp(`more than ${maxContainerDepth} levels deep`),
    );
    assert.deepEqual(
      (await read()).oplogVersion().toJSON(),
      before.oplogVersion().toJSON(),
      "nothing stored",
    );

    // A document created from such a snapshot is refused the same way.
    const deepSnapshot = new LoroDoc();
    deepSnapshot.import(sampleTimelineSnapshot());
    nest(fieldsOf(deepSnapshot, track), "name", levels);
    deepSnapshot.commit();
    await assert.rejects(
      client.createDocument("doc-deep", {
        adminToken,
        token,
        snapshot: deepSnapshot.export({ mode: "snapshot" }),
      }),
      /levels deep/,
    );

    // Loro in the server still reads and writes: a defined field lands, and a new document opens.
    const doc = await read();
    const next = doc.oplogVersion();
    fieldsOf(doc, track).set("name", "Renamed");
    doc.commit();
    assert.equal((await client.push("doc", doc.export({ mode: "update", from: next }))).status, "committed");
    await client.createDocument("doc-2", { adminToken, token, snapshot: sampleTimelineSnapshot() });
    const second = new LoroDoc();
    await client.pullInto("doc-2", second);
    assert.ok(interpretDocument(second, timelineSchema).entities.length > 0);
  }));

test("a value nested to the bound is judged by the schema, not refused for its depth", () =>
  withSampleServer(async ({ client, read }) => {
    const doc = await read();
    const from = doc.oplogVersion();
    // The track's fields map sits at depth 2: this chain ends exactly at the bound.
    nest(fieldsOf(doc, trackOf(doc)), "name", maxContainerDepth - 2);
    doc.commit();
    const pushed = await client.push("doc", doc.export({ mode: "update", from }));
    assert.equal(pushed.status, "rejected");
    assert.doesNotMatch(JSON.stringify(pushed), /levels deep/, "refused by the schema (a name is text)");
  }));
