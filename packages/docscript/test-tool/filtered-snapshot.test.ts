/**
 * `snapshot` pages by `related_to`, a time window or `kinds` with relations, read from the server's
 * stored rows (ADR 0467): page for page, cursor for cursor, what the replica's projection answers; on
 * a document above `readWholeUpTo` they read the rows the query can match, never the document, and a
 * query past the bounds is refused `read_limit` with how to narrow it.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { LoroDoc } from "loro-crdt";
import { checkDocument } from "../src/document/check-document.ts";
import { projectDocument } from "../src/document/interpret.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { lookupSnapshotPage, replicaPageRows, serverPageRows } from "../src/tool/rows-snapshot-page.ts";
import { ProjectionIndex, type SnapshotQuery, snapshotPage } from "../src/tool/snapshot-page.ts";
import { largeTimeline, largeTimelineRows } from "../test/large-timeline.ts";
import { type Harness, startHarness } from "./harness.ts";

let harness: Harness;
let firstClips: readonly string[] = [];
let entityCount = 0;
const extraClips = 7_000;

before(async () => {
  harness = await startHarness();
  await harness.createDocument("small", 40);
  const built = largeTimeline(extraClips);
  firstClips = built.firstClips;
  entityCount = built.entityCount;
  await harness.storeDocument("large", built.snapshot, largeTimelineRows(extraClips));
});
after(async () => await harness.close());

/** A fetch that counts requests by the route's last segment and the rows `rows` lookups answered. */
function countingFetch() {
  const counted = { paths: [] as string[], rows: 0 };
  const fetchImpl: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    const last = new URL(url).pathname.split("/").at(-1) ?? "";
    counted.paths.push(last);
    if (last === "rows" && response.ok) {
      const answer = (await response.clone().json()) as { results: { rows: unknown[] }[] };
      for (const result of answer.results) counted.rows += result.rows.length;
    }
    return response;
  };
  return { counted, fetchImpl };
}

describe("filtered snapshot pages from stored rows: a small document", { timeout: 600_000 }, () => {
  test("give the replica's pages and cursors on a small document", async () => {
    const replica = new LoroDoc();
    await harness.client.pullInto("small", replica);
    const projection = projectDocument(replica, timelineSchema);
    const index = new ProjectionIndex(projection);
    const issues = checkDocument(projection);
    const clips = [...projection.entities("clip")].map((clip) => clip.entityId).sort();
    const queries: SnapshotQuery[] = [
      { related_to: "track-1" },
      { related_to: "track-1", relation_kinds: ["contain"], include: "relations" },
      { related_to: clips[2]!, include: "entities", fields: ["volume"] },
      { related_to: "track-1", kinds: ["clip"], from_ms: 10_000, to_ms: 30_000 },
      { related_to: "track-1", ids: clips.slice(0, 5) },
      { from_ms: 12_000, to_ms: 20_000 },
      { from_ms: 40_000 },
      { to_ms: 9_000, kinds: ["clip"], include: "both" },
      { ids: clips.slice(3, 9), from_ms: 0, to_ms: 15_000 },
      { kinds: ["clip"] },
      { kinds: ["track", "image"], include: "relations", relation_kinds: ["contain"] },
      { related_to: "no-such-entity" },
    ];
    assert.ok(clips.length >= 40);
    for (const budget of [4000, 300]) {
      for (const query of queries) {
        let cursor: string | undefined;
        let pages = 0;
        do {
          const asked = { ...query, ...(cursor === undefined ? {} : { cursor }) };
          const { version: _version, ...fromRows } = await lookupSnapshotPage(
            timelineSchema,
            serverPageRows(harness.client, "small"),
            asked,
            budget,
          );
          const fromReplica = snapshotPage(index, issues, asked, budget);
          assert.deepEqual(fromRows, fromReplica, `${JSON.stringify(asked)} at ${budget}`);
          // The replica as a row source answers the same lookups with the same page.
          const { version: _same, ...fromReplicaRows } = await lookupSnapshotPage(
            timelineSchema,
            replicaPageRows(projection, "v", issues),
            asked,
            budget,
          );
          assert.deepEqual(
            fromReplicaRows,
            fromReplica,
            `replica rows: ${JSON.stringify(asked)} at ${budget}`,
          );
          cursor = fromReplica.next_cursor;
          pages += 1;
        } while (cursor !== undefined && pages < 200);
        assert.equal(cursor, undefined, `${JSON.stringify(query)} ended within 200 pages`);
      }
    }
    // The queries match something each way: related entities, relations, a window's clips.
    const window = snapshotPage(index, issues, { from_ms: 12_000, to_ms: 20_000 }, 4000);
    assert.ok(window.matched.entities > 0 && window.matched.relations > 0);
  });
});

describe("filtered snapshot pages from stored rows: above readWholeUpTo", { timeout: 600_000 }, () => {
  test("read the rows the query can match, not a document above readWholeUpTo", async () => {
    const { counted, fetchImpl } = countingFetch();
    const tool = harness.tool({ fetchImpl });
    assert.ok(entityCount > 20_000);
    const clip = firstClips[1]!;

    const related = await tool.handle({ op: "snapshot", doc_id: "large", related_to: clip });
    assert.ok(related.ok && related.op === "snapshot", JSON.stringify(related).slice(0, 300));
    assert.equal(related.matched.relations, 3, "contain from the track, marker, content");
    assert.equal(related.total.entities, entityCount);
    assert.ok(counted.rows < 50, `related_to read ${counted.rows} rows`);

    // Clip i starts at 8000 + i * 1000 ms for 1000 ms: [20 500, 22 500] overlaps clips 12 to 14.
    const before = counted.rows;
    const window = await tool.handle({
      op: "snapshot",
      doc_id: "large",
      from_ms: 20_500,
      to_ms: 22_500,
      kinds: ["clip"],
    });
    assert.ok(window.ok && window.op === "snapshot", JSON.stringify(window).slice(0, 300));
    assert.deepEqual(
      window.entities.map((entity) => (entity as { entityId: string }).entityId),
      ["large-clip-12", "large-clip-13", "large-clip-14"],
    );
    assert.equal(window.matched.relations, 9);
    // Every marker is read (one row per clip), never the document's other rows.
    assert.ok(counted.rows - before <= 2 * extraClips + 100, `the window read ${counted.rows - before} rows`);

    const pages: string[] = [];
    let matched = 0;
    let cursor: string | undefined;
    do {
      const page = await tool.handle({
        op: "snapshot",
        doc_id: "large",
        related_to: "track-1",
        include: "relations",
        ...(cursor === undefined ? {} : { cursor }),
      });
      assert.ok(page.ok && page.op === "snapshot");
      matched = page.matched.relations;
      pages.push(...page.relations.map((relation) => relation.relationId));
      cursor = page.next_cursor;
    } while (cursor !== undefined && pages.length < 20_000);
    assert.ok(matched > extraClips);
    assert.equal(new Set(pages).size, matched, "every relation of track-1 once, across pages");
    assert.equal(pages.length, matched);

    // Past the bounds, on a document this large: refused with how to narrow, never read whole.
    const refused = await tool.handle({ op: "snapshot", doc_id: "large", kinds: ["clip", "image"] });
    assert.ok(!refused.ok && refused.error.code === "read_limit", JSON.stringify(refused));
    assert.match(refused.error.message, /include: "entities"/);

    assert.ok(
      !counted.paths.includes("snapshot") && !counted.paths.includes("updates"),
      `pulled: ${[...new Set(counted.paths)].join(" ")}`,
    );
    await tool.close();
  });
});
