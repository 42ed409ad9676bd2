/**
 * One page function over any row source (ADR 0485): for every kind of `snapshot` page — plain, by
 * kind, ids, relation kinds, `related_to`, a time window, kinds with relations — the page read from
 * the document server's store and the page read from a local replica of the same document are the
 * same answer, page after page (rows, cursors, counts, what fits the budget), and together the pages
 * list what the query matches in the whole document, each once.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { LoroDoc } from "loro-crdt";
import { checkDocument } from "../src/document/check-document.ts";
import { projectDocument } from "../src/document/interpret.ts";
import { encodeVersion } from "../src/document/version.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { lookupSnapshotPage, replicaPageRows, serverPageRows } from "../src/tool/rows-snapshot-page.ts";
import { matchingEntityIds, ProjectionIndex, type SnapshotQuery } from "../src/tool/snapshot-page.ts";
import { type Harness, startHarness } from "./harness.ts";

let harness: Harness;
before(async () => {
  harness = await startHarness();
  // More entities and relations than one window (200) of either, so pages cross windows.
  await harness.createDocument("pages", 120);
});
after(async () => await harness.close());

test("a page from the server's store and one from a local replica are the same, for every kind of page", async () => {
  const replica = new LoroDoc();
  await harness.client.pullInto("pages", replica);
  const version = encodeVersion(replica.oplogVersion());
  const projection = projectDocument(replica, timelineSchema);
  const index = new ProjectionIndex(projection);
  const issues = checkDocument(projection);
  const clips = [...projection.entities("clip")].map((clip) => clip.entityId).sort();
  assert.ok(index.sortedEntityIds().length > 200 && index.sortedRelationIds().length > 200);

  const queries: Record<string, SnapshotQuery> = {
    plain: {},
    "plain, entities": { include: "entities" },
    "plain, relations": { include: "relations" },
    kind: { kinds: ["clip"], include: "entities", fields: ["volume"] },
    kinds: { kinds: ["track", "clip", "no-such-kind"], include: "entities" },
    ids: { ids: [...clips.slice(0, 30), "no-such-entity", "track-1"] },
    "ids, relations of a kind": { ids: clips.slice(5, 40), relation_kinds: ["marker"] },
    "relation kind": { relation_kinds: ["contain"] },
    "relation kinds, relations": { relation_kinds: ["contain", "marker"], include: "relations" },
    related: { related_to: "track-1" },
    "time window": { from_ms: 12_000, to_ms: 40_000 },
    "kinds with relations": { kinds: ["track"], relation_kinds: ["contain"] },
  };
  for (const budget of [4000, 300]) {
    for (const [name, query] of Object.entries(queries)) {
      const listed = { entities: [] as string[], relations: [] as string[] };
      let cursor: string | undefined;
      let pages = 0;
      let matched = { entities: 0, relations: 0 };
      do {
        const asked = { ...query, ...(cursor === undefined ? {} : { cursor }) };
        const fromStore = await lookupSnapshotPage(
          timelineSchema,
          serverPageRows(harness.client, "pages"),
          asked,
          budget,
        );
        const fromReplica = await lookupSnapshotPage(
          timelineSchema,
          replicaPageRows(projection, version, issues),
          asked,
          budget,
        );
        assert.deepEqual(fromReplica, fromStore, `${name}, page ${pages + 1} at ${budget}`);
        assert.equal(fromStore.version, version);
        listed.entities.push(
          ...fromStore.entities.map((entity) => (entity as { entityId: string }).entityId),
        );
        listed.relations.push(...fromStore.relations.map((relation) => relation.relationId));
        matched = fromStore.matched;
        assert.equal(
          fromStore.remaining.entities + fromStore.remaining.relations,
          matched.entities + matched.relations - listed.entities.length - listed.relations.length,
          `${name}: what remains after page ${pages + 1} at ${budget}`,
        );
        cursor = fromStore.next_cursor;
        pages += 1;
      } while (cursor !== undefined && pages < 400);
      assert.equal(cursor, undefined, `${name} ended within 400 pages at ${budget}`);
      // The pages together: what the query matches in the whole replica, each once, in id order.
      const include = query.include ?? "both";
      const entities = include === "relations" ? [] : matchingEntityIds(index, query);
      assert.deepEqual(listed.entities, entities, `${name}: the entities listed at ${budget}`);
      assert.equal(matched.entities, entities.length);
      assert.equal(new Set(listed.relations).size, listed.relations.length, `${name}: relations once`);
      assert.deepEqual(listed.relations, [...listed.relations].sort(), `${name}: relations in id order`);
      assert.equal(matched.relations, listed.relations.length);
      if (budget === 4000)
        assert.ok(entities.length + listed.relations.length > 0, `${name} matches something`);
    }
  }
});
