/**
 * A holder's relations walked in order (`for (const held of relations.of(track, "contain"))`, a call
 * or two on each clip): the clips' relations and their ends are read ahead a chunk at a time, so the
 * walk asks the server a few times per chunk, not once or twice per clip, answers what a whole read
 * answers, and a script that looks at the first few clips only never reads the others.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { largeTimelineHost, overlayTrackId } from "../../test/large-timeline.ts";
import { projectDocument } from "../document/interpret.ts";
import { demandOf, onDemandProjection } from "../document/on-demand-projection.ts";
import { lookupRowSource, type RowLookup } from "../document/row-source.ts";
import type { DocumentHost } from "../server/document-host.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { documentVersion } from "./document-cache.ts";

const extraClips = 3_000;
const overlayEvery = 10;
let host: DocumentHost;
let version: string;
let whole: ReturnType<typeof projectDocument>;

before(async () => {
  const stored = await largeTimelineHost(extraClips, overlayEvery);
  host = stored.host;
  version = documentVersion(stored.replica);
  whole = projectDocument(stored.replica, timelineSchema);
});
after(() => host.close());

/** A projection reading on demand, its requests recorded, and a call settled as a run settles it. */
function recordedProjection() {
  const asked: RowLookup[][] = [];
  let inFlight = 0;
  const projection = onDemandProjection(
    timelineSchema,
    lookupRowSource(async (lookups) => {
      asked.push([...lookups]);
      inFlight++;
      try {
        return await host.rowLookup("doc", lookups);
      } finally {
        inFlight--;
      }
    }),
    version,
    100,
  );
  const settle = async <T>(call: () => T): Promise<T> => {
    for (let round = 0; round < 16; round++) {
      const answer = call();
      if (!projection.lacking) return answer;
      await projection.demand.fill();
    }
    throw new Error("the call still lacked rows");
  };
  const quiet = async () => {
    for (let still = 0; still < 5; ) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      still = inFlight === 0 ? still + 1 : 0;
    }
  };
  return { projection, asked, settle, quiet };
}

/** Every entity id a request asked about (by id, as a relation's end, or as a variant's base). */
const idsAsked = (asked: readonly RowLookup[][]) =>
  new Set(
    asked.flat().flatMap((lookup) => {
      const fields = lookup as Record<string, unknown>;
      return ["ids", "endpoints", "variantsOf", "endpoint", "variantOf"].flatMap((field) => {
        const value = fields[field];
        return typeof value === "string" ? [value] : Array.isArray(value) ? (value as string[]) : [];
      });
    }),
  );

describe("a holder's relations walked in order", () => {
  it("reads the ends a chunk at a time and answers as a whole read does", async () => {
    const { projection, asked, settle } = recordedProjection();
    const held = await settle(() => projection.relationsOf(overlayTrackId, "contain"));
    assert.equal(held.length, extraClips / overlayEvery);
    const before = asked.length;
    for (const relation of held) {
      const clipId = relation.endpoint1EntityId;
      const [markerOf] = await settle(() => projection.relationsOf(clipId, "marker"));
      const marker = await settle(() => projection.entity(markerOf!.endpoint1EntityId));
      assert.deepEqual(marker, whole.entity(markerOf!.endpoint1EntityId), clipId);
      assert.deepEqual(
        projection.relationsOf(clipId, "marker"),
        whole.relationsOf(clipId, "marker"),
        `${clipId}'s marker as a whole read has it`,
      );
    }
    // Two calls on each of 300 clips: 600 requests one by one; chunks of 32 ask a few each.
    const requests = asked.length - before;
    assert.ok(requests <= 40, `${requests} requests for ${held.length} clips`);
    assert.deepEqual(demandOf(projection)?.readAheadErrors, [], "no read ahead was refused");
  });

  it("a walk whose calls ask beyond each clip (a delete's checks) reads that level ahead too", async () => {
    const { projection, asked, settle } = recordedProjection();
    const held = await settle(() => projection.relationsOf(overlayTrackId, "contain"));
    const before = asked.length;
    for (const relation of held) {
      const clipId = relation.endpoint1EntityId;
      const [markerOf] = await settle(() => projection.relationsOf(clipId, "marker"));
      // The marker's own relations: an entity past the clip, as deleting the clip checks them.
      const markerId = markerOf!.endpoint1EntityId;
      const touching = await settle(() => projection.relationsOf(markerId));
      assert.deepEqual(touching, whole.relationsOf(markerId), markerId);
    }
    // One by one: 300 clips' markers' relations, 300 requests more than the walk above.
    const requests = asked.length - before;
    assert.ok(requests <= 80, `${requests} requests for ${held.length} clips`);
    // Each lookup is a store statement or more: a chunk's ends' relations and variants are asked in one
    // lookup each, not one per end.
    const lookups = asked.slice(before).flat().length;
    assert.ok(lookups <= 200, `${lookups} lookups for ${held.length} clips (one per end and kind: 1,158)`);
    assert.deepEqual(demandOf(projection)?.readAheadErrors, [], "no read ahead was refused");
  });

  it("a script that looks at the first few clips never reads the others", async () => {
    const { projection, asked, settle, quiet } = recordedProjection();
    const held = await settle(() => projection.relationsOf(overlayTrackId, "contain"));
    for (const relation of held.slice(0, 3)) {
      await settle(() => projection.relationsOf(relation.endpoint1EntityId, "marker"));
    }
    await quiet();
    const asked2 = idsAsked(asked);
    const beyond = held.slice(64).filter((relation) => asked2.has(relation.endpoint1EntityId));
    assert.deepEqual(beyond, [], "no clip past the first two chunks is read");
    assert.ok(asked2.has(held[31]!.endpoint1EntityId), "the first chunk is read ahead");
  });
});
