/**
 * Links and moves of ordered relations over a projection reading rows on demand find their place from
 * the store's index of positions (`orderedRelations`), not from every relation of the holder: the keys
 * they write are the ones a session holding every row writes, and far fewer rows are read than the
 * track holds.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { largeTimelineHost, overlayTrackId } from "../../test/large-timeline.ts";
import { sessionOver } from "../../test/session-over.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { documentVersion } from "../tool/document-cache.ts";
import { projectDocument, versionKey } from "./interpret.ts";
import { demandOf, onDemandProjection } from "./on-demand-projection.ts";
import { lookupRowSource } from "./row-source.ts";

const extraClips = 3_000;

it("appends and moves on a track of thousands from the ends the store's index reads", async () => {
  const { host, replica } = await largeTimelineHost(extraClips, 10);
  try {
    const whole = projectDocument(replica, timelineSchema);
    const overlayHeld = whole.orderedRelations("contain", overlayTrackId, "first", Number.POSITIVE_INFINITY);
    assert.equal(overlayHeld.length, extraClips / 10);
    const onDemand = onDemandProjection(
      timelineSchema,
      lookupRowSource((lookups) => host.rowLookup("doc", lookups)),
      documentVersion(replica),
      20_000,
    );
    const runs = [whole, onDemand].map((base) => {
      const doc = replica.fork();
      doc.setDetachedEditing(true);
      doc.checkout(replica.frontiers());
      base.readAt = versionKey(doc);
      return sessionOver(doc, base);
    });
    const last = overlayHeld.at(-1)?.relationId as string;
    const second = overlayHeld[1]?.relationId as string;
    // A clip of track-1, taken off it and put on the overlay track at an index, then one at its end.
    const containOf = (clipId: string) =>
      whole.storedRelationsOf(clipId, "contain").find((relation) => relation.endpoint1EntityId === clipId)
        ?.relationId as string;
    const movedClip = containOf("large-clip-0");
    const appendedClip = containOf("large-clip-1");
    for (const [at, { session, call }] of runs.entries()) {
      const base = [whole, onDemand][at];
      const { relations } = session;
      await call(() => relations.move(last, { index: 0 }));
      await call(() => relations.move(second, { index: 3 }));
      await call(() => relations.move(last, {}));
      await call(() => relations.unlink(movedClip));
      await call(() => relations.unlink(appendedClip));
      await call(
        () =>
          relations.link({
            relationKind: "contain",
            endpoint0EntityId: overlayTrackId,
            endpoint1EntityId: "large-clip-0",
            index: 2,
          }),
        "contain-linked-at-2",
      );
      await call(
        () =>
          relations.link({
            relationKind: "contain",
            endpoint0EntityId: overlayTrackId,
            endpoint1EntityId: "large-clip-1",
          }),
        "contain-linked-last",
      );
      await call(() => relations.move("contain-linked-last", { index: 1 }));
      if (base === onDemand) {
        const read = demandOf(onDemand)?.rowsRead ?? 0;
        assert.ok(read < extraClips / 10, `${read} rows read for a track of ${extraClips / 10} clips`);
      }
      // An index past the end is the end: the first 400 read, all of the track's.
      await call(() => relations.move(second, { index: 400 }));
    }
    const [wholeSession, onDemandSession] = runs.map(({ session }) => session);
    const positions = (session: typeof wholeSession) =>
      JSON.stringify(session?.doc.getMap("relations").toJSON());
    assert.equal(positions(onDemandSession), positions(wholeSession), "the same keys written");
  } finally {
    await host.close();
  }
});
