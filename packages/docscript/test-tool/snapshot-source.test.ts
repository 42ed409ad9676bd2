/**
 * Where a `snapshot` page comes from: the document server's stored rows, read through its row lookups
 * (`POST …/rows`, ADR 0485) for every query — a window of them for a plain, kind or relation-kind
 * query, the rows an id, `related_to`, time-window or kinds-with-relations query can match: the tool
 * pulls nothing of the document; the page lists what the document holds, and another client's write
 * shows on the next page.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { LoroDoc } from "loro-crdt";
import { openDocument } from "../src/document/document-session.ts";
import { encodeVersion, versionLabel } from "../src/document/version.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { type Harness, startHarness } from "./harness.ts";

let harness: Harness;
before(async () => {
  harness = await startHarness();
  await harness.createDocument("source", 30);
});
after(async () => await harness.close());

test("plain, kind, id and related pages read the server's rows, never the document, and match it", async () => {
  const paths: string[] = [];
  const tool = harness.tool({
    fetchImpl: (input, init) => {
      paths.push(
        new URL(String(input instanceof Request ? input.url : input)).pathname.split("/").at(-1) ?? "",
      );
      return fetch(input, init);
    },
  });
  const document = await harness.read("source");

  // Every entity and relation once, page by page, with counts that add up.
  const seen = { entities: [] as string[], relations: [] as string[] };
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const result = await tool.handle({ op: "snapshot", doc_id: "source", ...(cursor ? { cursor } : {}) });
    assert.ok(result.ok && result.op === "snapshot", JSON.stringify(result));
    seen.entities.push(...result.entities.map((entity) => (entity as { entityId: string }).entityId));
    seen.relations.push(...result.relations.map((relation) => relation.relationId));
    assert.equal(
      result.remaining.entities + result.remaining.relations,
      result.matched.entities + result.matched.relations - seen.entities.length - seen.relations.length,
    );
    cursor = result.next_cursor;
    if (cursor === undefined) break;
  }
  assert.deepEqual(
    seen.entities,
    document.entities.map((entity) => entity.entityId),
  );
  assert.deepEqual(
    [...seen.relations].sort(),
    document.relations.map((relation) => relation.relationId).sort(),
  );
  // One page path: the row lookups, never the entity or relation page routes.
  assert.ok(paths.includes("rows") && !paths.some((path) => path === "entities" || path === "relations"));
  assert.ok(!paths.includes("snapshot") && !paths.includes("updates"), `pulled: ${paths.join(" ")}`);

  const clips = await tool.handle({
    op: "snapshot",
    doc_id: "source",
    kinds: ["clip"],
    include: "entities",
    fields: ["volume"],
  });
  assert.ok(clips.ok && clips.op === "snapshot");
  const documentClips = document.entities.filter((entity) => entity.entityKind === "clip");
  assert.equal(clips.matched.entities, documentClips.length);
  assert.deepEqual(
    clips.entities.slice(0, 3),
    documentClips.slice(0, 3).map((clip) => ({
      entityId: clip.entityId,
      entityKind: "clip",
      payload: { volume: clip.payload.volume },
    })),
  );

  const picked = documentClips.slice(0, 3).map((clip) => clip.entityId);
  const byId = await tool.handle({ op: "snapshot", doc_id: "source", ids: picked });
  assert.ok(byId.ok && byId.op === "snapshot");
  assert.deepEqual(
    byId.entities.map((entity) => (entity as { entityId: string }).entityId),
    [...picked].sort(),
  );
  const touching = document.relations
    .filter(
      (relation) =>
        picked.includes(relation.endpoint0EntityId) || picked.includes(relation.endpoint1EntityId),
    )
    .map((relation) => relation.relationId)
    .sort();
  assert.deepEqual(
    byId.relations.map((relation) => relation.relationId),
    touching,
  );
  assert.ok(!paths.includes("snapshot"), "no page so far pulled the document");

  // related_to reads the rows it can match, and agrees with the document.
  const track = document.entities.find((entity) => entity.entityKind === "track")!;
  const held = await tool.handle({
    op: "snapshot",
    doc_id: "source",
    related_to: track.entityId,
    include: "relations",
  });
  assert.ok(held.ok && held.op === "snapshot");
  assert.ok(paths.includes("rows") && !paths.includes("snapshot"), `related_to read: ${paths.join(" ")}`);
  assert.equal(
    held.matched.relations,
    document.relations.filter(
      (relation) =>
        relation.endpoint0EntityId === track.entityId || relation.endpoint1EntityId === track.entityId,
    ).length,
  );

  // Another client's write shows on the next page read from the server.
  const other = new LoroDoc();
  await harness.client.pullInto("source", other);
  const from = other.oplogVersion();
  openDocument(other, timelineSchema).entities.update(picked[0]!, [
    { op: "set", path: ["volume"], value: -17 },
  ]);
  other.commit();
  assert.equal(
    (await harness.client.push("source", other.export({ mode: "update", from }))).status,
    "committed",
  );
  const after = await tool.handle({
    op: "snapshot",
    doc_id: "source",
    ids: [picked[0]!],
    include: "entities",
  });
  assert.ok(after.ok && after.op === "snapshot");
  assert.equal((after.entities[0] as { payload: { volume: number } }).payload.volume, -17);
  assert.equal(after.version, versionLabel(encodeVersion(other.oplogVersion())));
});
