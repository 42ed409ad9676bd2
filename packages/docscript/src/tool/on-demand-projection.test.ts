import assert from "node:assert/strict";
import { it } from "node:test";
import { LoroDoc, type LoroMap } from "loro-crdt";
import { largeTimelineHost } from "../../test/large-timeline.ts";
import { onDemandProjection } from "../document/on-demand-projection.ts";
import { lookupRowSource, type RowLookup, type RowLookupAnswer } from "../document/row-source.ts";
import { sampleTimelineSnapshot } from "../module/sample-timeline.ts";
import { DocScriptError } from "../schema/docscript-error.ts";
import { DocumentHost } from "../server/document-host.ts";
import { createSqliteDocumentStore } from "../server/sqlite-document-store.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { documentVersion } from "./document-cache.ts";

/** A document host over an in-memory store holding the sample timeline as "doc", and a replica of it. */
async function sampleHost() {
  const host = new DocumentHost({
    store: createSqliteDocumentStore({ path: ":memory:" }),
    schema: timelineSchema,
  });
  await host.create("doc", "token-0123456789abcdef", sampleTimelineSnapshot());
  const replica = LoroDoc.fromSnapshot((await host.snapshot("doc")).bytes);
  return { host, replica };
}

/**
 * A document host over an in-memory store holding `largeTimeline(clips)` as "doc", stored as the scale
 * bench seeds it (the rows written out beside the snapshot, not read from it), and a projection of it
 * reading rows on demand from the host.
 */
async function largeHost(clips: number) {
  const { host, replica } = await largeTimelineHost(clips);
  const projection = onDemandProjection(
    timelineSchema,
    lookupRowSource((lookups) => host.rowLookup("doc", lookups)),
    documentVersion(replica),
    20_000,
  );
  return { host, projection };
}

it("reads what a lookup lacked from the server's rows, and refuses an answer at another version", async () => {
  const { host, replica } = await sampleHost();
  try {
    const projection = onDemandProjection(
      timelineSchema,
      lookupRowSource((lookups) => host.rowLookup("doc", lookups)),
      documentVersion(replica),
      20_000,
    );
    // Nothing held: the lookup is answered "absent" and recorded as lacking.
    assert.equal(projection.entity("track-1"), undefined);
    assert.equal(projection.lacking, true);
    await projection.demand.fill();
    assert.equal(projection.lacking, false);
    assert.equal(projection.entity("track-1")?.entityKind, "track");
    // Its relations came with it (a short page): answered without another request.
    const requests = projection.demand.requests;
    assert.ok(projection.relationsOf("track-1").length > 0);
    assert.equal(projection.lacking, false);
    assert.equal(projection.demand.requests, requests);

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
      projection.demand.fill(),
      (error: unknown) => DocScriptError.isInstance(error) && error.code === "document_changed",
    );
    assert.notEqual(projection.demand.movedTo, undefined);
  } finally {
    await host.close();
  }
});

it("holds a listing's entities whole: their claims and variants come with the page", async () => {
  const { host, replica } = await sampleHost();
  try {
    const projection = onDemandProjection(
      timelineSchema,
      lookupRowSource((lookups) => host.rowLookup("doc", lookups)),
      documentVersion(replica),
      20_000,
    );
    assert.deepEqual(projection.entitiesListed("track", 10), []);
    await projection.demand.fill();
    const tracks = projection.entitiesListed("track", 10).map((track) => track.entityId);
    assert.deepEqual(tracks, ["track-1", "track-2", "track-3"]);
    assert.equal(projection.lacking, false, "each listed entity read without another request");
    assert.equal(projection.demand.requests, 1);
    // What a write's check reads of them next: their variants, known from the same answer.
    for (const trackId of tracks) assert.deepEqual(projection.variantsOf(trackId), []);
    assert.equal(projection.lacking, false, "their variants are known");
  } finally {
    await host.close();
  }
});

/** An answer without the claims its lookups asked for (`claimed`). */
function withoutClaims(answer: RowLookupAnswer): RowLookupAnswer {
  return { ...answer, results: answer.results.map(({ claimed: _claimed, ...result }) => result) };
}

it("asks bare for entities whose rows it holds, and reads by id a named row it lacks", async () => {
  const { host, replica } = await sampleHost();
  try {
    const asked: RowLookup[][] = [];
    // A row the source adds to each bare answer, as if it claimed the entity too.
    let named: string | undefined;
    const projection = onDemandProjection(
      timelineSchema,
      lookupRowSource(async (lookups) => {
        asked.push([...lookups]);
        // Answered as a server that does not read a page's claims would (ADR 0511): the listing brings
        // the clips' rows only, and looking a clip up asks its claims.
        const answer = withoutClaims(await host.rowLookup("doc", lookups));
        if (named === undefined) return answer;
        const extra = { root: "entities" as const, rowId: named };
        return {
          ...answer,
          results: answer.results.map((result, index) => {
            const lookup = lookups[index];
            return lookup !== undefined && "members" in lookup && lookup.bare === true
              ? { ...result, rows: [...result.rows, extra] }
              : result;
          }),
        };
      }),
      documentVersion(replica),
      20_000,
    );
    // A listing brings the clips' rows; looking each clip up then asks which rows claim it, bare.
    assert.deepEqual(projection.entityIdsAfter("clip", undefined, 10), []);
    await projection.demand.fill();
    const clips = projection.entityIdsAfter("clip", undefined, 10);
    assert.deepEqual(clips, ["clip-1", "clip-2", "clip-3"]);
    projection.entity("clip-1");
    assert.equal(projection.lacking, true);
    await projection.demand.fill();
    const clipLookup = asked.at(-1)?.find((lookup) => "members" in lookup && lookup.ids?.includes("clip-1"));
    assert.ok(
      clipLookup !== undefined && "members" in clipLookup && clipLookup.bare === true,
      JSON.stringify(asked),
    );
    assert.equal(projection.lacking, false);
    assert.equal(projection.entity("clip-1")?.entityKind, "clip");
    assert.equal(projection.lacking, false);

    // A bare answer naming a row the projection does not hold: that row is read by id in the same fill.
    named = "track-3";
    assert.equal(projection.demand.known.hasId("row", "track-3"), false);
    const requests = asked.length;
    projection.entity("clip-2");
    await projection.demand.fill();
    assert.deepEqual(asked.slice(requests).at(-1), [{ rows: "entities", ids: ["track-3"] }]);
    assert.equal(projection.demand.known.hasId("row", "track-3"), true);
    assert.equal(projection.lacking, false);
    assert.equal(projection.entity("clip-2")?.entityKind, "clip");
  } finally {
    await host.close();
  }
});

it("reads the relations and variants of many entities in one request, a hub's whole in pages", async () => {
  // Every clip on track-1: a hub of 5,100 contains, more than one page of a batched lookup holds.
  const { host, projection } = await largeHost(5_100);
  try {
    const markers = Array.from({ length: 600 }, (_, index) => `large-marker-${index}`);
    for (const markerId of markers) projection.entity(markerId);
    await projection.demand.fill();
    assert.ok(projection.demand.requests <= 2, `${projection.demand.requests} requests`);
    // What a check of 600 entities asks next, their relations and variants: asked for in batches, a
    // request or two, not one lookup per entity.
    const first = projection.demand.requests;
    for (const markerId of markers) {
      projection.relationsOf(markerId);
      projection.variantsOf(markerId);
    }
    await projection.demand.fill();
    assert.ok(projection.demand.requests - first <= 2, `${projection.demand.requests - first} requests`);
    const requests = projection.demand.requests;
    for (const markerId of markers) {
      assert.equal(projection.relationsOf(markerId).length, 1, markerId);
      assert.deepEqual(projection.variantsOf(markerId), []);
    }
    assert.equal(projection.lacking, false);
    assert.equal(projection.demand.requests, requests);
    // The hub among others: its batch is full, so it is read on its own, whole.
    for (const entityId of ["track-1", "large-clip-1", "large-clip-2"]) projection.relationsOf(entityId);
    await projection.demand.fill();
    assert.equal(projection.lacking, false);
    const held = projection.relationsOf("track-1").filter((relation) => relation.relationKind === "contain");
    assert.ok(held.length >= 5_100, `${held.length} contains held`);
    assert.equal(projection.lacking, false);
    assert.equal(projection.relationsOf("large-clip-2").length, 3);
  } finally {
    await host.close();
  }
});

it("tells a hub has more relations than a check asks from the page its lookup read, without asking again", async () => {
  const { host, projection } = await largeHost(600);
  try {
    // The track looked up: a page of its relations comes with it, full (it holds 600 clips).
    projection.entity("track-1");
    await projection.demand.fill();
    const requests = projection.demand.requests;
    for (const count of [0, 6, 99])
      assert.equal(projection.hasMoreRelations("track-1", count), true, `${count}`);
    assert.equal(projection.lacking, false);
    assert.equal(projection.demand.requests, requests);
    // Past that page, a page of its own is read.
    assert.equal(projection.hasMoreRelations("track-1", 700), true);
    assert.equal(projection.lacking, true);
    await projection.demand.fill();
    assert.equal(projection.hasMoreRelations("track-1", 700), false);
    assert.equal(projection.lacking, false);
  } finally {
    await host.close();
  }
});
