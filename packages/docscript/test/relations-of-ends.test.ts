/**
 * `relations.of(entityId, relationKind, { first: n } | { last: n })` answers one end of the relations a
 * holder holds of a kind, in order (position, then id): the same as a projection holding every row
 * sorts them, on a session over the whole document and on one reading rows on demand from a SQLite
 * and a PostgreSQL store (the store's index of positions, ADR 0484), the run's own writes included.
 * Anything but one whole `first` or `last` from 1 to `maxOrderedPage` is refused with a typed error,
 * in a session and in a script.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { LoroDoc } from "loro-crdt";
import { projectDocument, versionKey } from "../src/document/interpret.ts";
import { demandOf, onDemandProjection } from "../src/document/on-demand-projection.ts";
import type { Projection } from "../src/document/projection.ts";
import { lookupRowSource } from "../src/document/row-source.ts";
import { maxOrderedPage } from "../src/document/rows-on-demand.ts";
import { DocScriptError } from "../src/schema/docscript-error.ts";
import type { DocumentStore } from "../src/server/document-store.ts";
import { DocumentHost, hashToken } from "../src/server/index.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";
import { createEditScriptPool } from "../src/tool/create-edit-script-pool.ts";
import { documentVersion } from "../src/tool/document-cache.ts";
import { runEditScript } from "../src/tool/run-edit-script.ts";
import { largeTimeline, largeTimelineRows, overlayTrackId } from "./large-timeline.ts";
import { describeOnBothStores } from "./on-both-stores.ts";
import { sessionOver } from "./session-over.ts";

const extraClips = 300;
/** Every tenth extra clip is on the overlay track. */
const overlayClips = extraClips / 10;

/** Ends that are not one whole `first` or `last` from 1 to `maxOrderedPage`, as a script might pass. */
const hostileEnds: readonly unknown[] = [
  { first: 0 },
  { last: -1 },
  { first: 1.5 },
  { last: Number.NaN },
  { first: Number.POSITIVE_INFINITY },
  { last: 1e12 },
  { first: maxOrderedPage + 1 },
  { last: Number.MAX_SAFE_INTEGER + 2 },
  { first: "3" },
  { last: null },
  { first: 1, last: 1 },
  { lats: 1 },
  {},
  [],
  [1],
  null,
  "last",
  5,
  "x".repeat(300_000),
  Array.from({ length: 5_000 }, (_, index) => index),
];

/** A session over `base` at `replica`'s version, in a detached fork of it. */
function sessionAt(replica: LoroDoc, base: Projection) {
  const doc = replica.fork();
  doc.setDetachedEditing(true);
  doc.checkout(replica.frontiers());
  base.readAt = versionKey(doc);
  return sessionOver(doc, base);
}

const ids = (relations: readonly { relationId: string }[]) =>
  relations.map((relation) => relation.relationId);

async function checkEnds(store: DocumentStore) {
  const { snapshot } = largeTimeline(extraClips, 10);
  await store.createDocument({
    documentId: "doc",
    tokenHash: hashToken("token-0123456789abcdef"),
    snapshot,
    rows: largeTimelineRows(extraClips, 10),
    issues: [],
  });
  const host = new DocumentHost({ store, schema: timelineSchema });
  try {
    const replica = LoroDoc.fromSnapshot((await host.snapshot("doc")).bytes);
    const whole = projectDocument(replica, timelineSchema);
    const inOrder = ids(whole.orderedRelations("contain", overlayTrackId, "first", Number.POSITIVE_INFINITY));
    assert.equal(inOrder.length, overlayClips);
    const onDemand = onDemandProjection(
      timelineSchema,
      lookupRowSource((lookups) => host.rowLookup("doc", lookups)),
      documentVersion(replica),
      20_000,
    );
    for (const [name, base] of [
      ["whole", whole],
      ["on demand", onDemand],
    ] as const) {
      const { session, call } = sessionAt(replica, base);
      const of = (holder: string, kind: string | undefined, ends: unknown) =>
        call(() => session.relations.of(holder, kind, ends as { first: number }));

      const [last] = await of(overlayTrackId, "contain", { last: 1 });
      assert.equal(last?.relationId, inOrder.at(-1), `${name}: the last one`);
      assert.deepEqual(Object.keys(last ?? {}).sort(), [
        "endpoint0EntityId",
        "endpoint1EntityId",
        "relationId",
        "relationKind",
      ]);
      if (base === onDemand) {
        const read = demandOf(onDemand)?.rowsRead ?? 0;
        assert.ok(read < overlayClips, `${read} rows read for the last of a track of ${overlayClips}`);
      }
      for (const n of [1, 3, overlayClips - 1, overlayClips, overlayClips + 1, maxOrderedPage]) {
        assert.deepEqual(
          ids(await of(overlayTrackId, "contain", { first: n })),
          inOrder.slice(0, n),
          `${name} first ${n}`,
        );
        assert.deepEqual(
          ids(await of(overlayTrackId, "contain", { last: n })),
          inOrder.slice(-n),
          `${name} last ${n}`,
        );
      }
      // Another holder, one holding none, a kind held in a slot (never ordered), an entity held.
      const trackOne = ids(whole.orderedRelations("contain", "track-1", "first", 4));
      assert.equal(trackOne.length, 4);
      assert.deepEqual(ids(await of("track-1", "contain", { first: 4 })), trackOne, `${name}: track-1`);
      assert.deepEqual(await of("no-such-track", "contain", { last: 3 }), []);
      assert.deepEqual(await of("large-clip-3", "marker", { first: 3 }), []);
      assert.deepEqual(
        await of("large-clip-3", "contain", { last: 2 }),
        [],
        "a clip holds its content in a slot",
      );

      // The run's own writes: the last clip moved to the front, a clip appended at the end.
      await call(() => session.relations.move(inOrder.at(-1) as string, { index: 0 }));
      const onTrackOne = whole
        .storedRelationsOf("large-clip-1", "contain")
        .find((relation) => relation.endpoint1EntityId === "large-clip-1");
      await call(() => session.relations.unlink(onTrackOne?.relationId as string));
      await call(
        () =>
          session.relations.link({
            relationKind: "contain",
            endpoint0EntityId: overlayTrackId,
            endpoint1EntityId: "large-clip-1",
          }),
        "contain-appended",
      );
      const moved = [inOrder.at(-1), ...inOrder.slice(0, -1), "contain-appended"];
      assert.deepEqual(
        ids(await of(overlayTrackId, "contain", { first: 2 })),
        moved.slice(0, 2),
        `${name}: after the move`,
      );
      assert.deepEqual(
        ids(await of(overlayTrackId, "contain", { last: 2 })),
        moved.slice(-2),
        `${name}: after the append`,
      );

      for (const ends of hostileEnds)
        await assert.rejects(
          of(overlayTrackId, "contain", ends),
          (error) =>
            error instanceof DocScriptError &&
            error.code === "invalid_operation" &&
            error.message.length < 300,
          `${name}: ${JSON.stringify(ends).slice(0, 60)}`,
        );
      for (const [holder, kind] of [
        [overlayTrackId, undefined],
        [overlayTrackId, 7],
        [42, "contain"],
      ] as const)
        await assert.rejects(
          of(holder as string, kind as string, { last: 1 }),
          (error) => error instanceof DocScriptError && error.code === "invalid_operation",
          `${name}: of(${holder}, ${kind})`,
        );
    }
  } finally {
    await host.close();
  }
}

describeOnBothStores("relations.of reads one end of a holder's ordered relations", "ends", checkEnds);

describe("relations.of with ends in a script", () => {
  const pool = createEditScriptPool({ size: 1 });
  after(() => pool.close());
  const schema = {
    module: new URL("../src/timeline/timeline-schema.ts", import.meta.url),
    exportName: "timelineSchema",
  };

  it("moves a track's last clip to its front as the prompt shows, and refuses hostile ends by code", async () => {
    const replica = LoroDoc.fromSnapshot(largeTimeline(extraClips, 10).snapshot);
    const inOrder = ids(
      projectDocument(replica, timelineSchema).orderedRelations(
        "contain",
        overlayTrackId,
        "first",
        maxOrderedPage,
      ),
    );
    const hostile = [
      "{ first: 0 }",
      "{ last: -3 }",
      "{ first: 2.5 }",
      "{ last: NaN }",
      "{ first: Infinity }",
      "{ last: 1e300 }",
      `{ first: ${maxOrderedPage + 1} }`,
      "{ first: '2' }",
      "{ first: 1, last: 1 }",
      "{}",
      "[]",
      "'last'",
      "null",
      "'x'.repeat(300000)",
    ];
    const result = await runEditScript(
      { pool, schema, hooks: {} },
      {
        docId: "ends",
        replica,
        version: "v",
        script: `const overlay = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'overlay');
const last = relations.of(overlay.entityId, 'contain', { last: 1 })[0];
relations.move(last.relationId, { index: 0 });
console.log(relations.of(overlay.entityId, 'contain', { first: 2 }).map((r) => r.relationId).join(' '));
for (const ends of [${hostile.join(", ")}]) {
  try {
    relations.of(overlay.entityId, 'contain', ends);
    console.log('answered');
  } catch (error) {
    console.log(error.code);
  }
}`,
      },
    );
    assert.ok(result.ok, JSON.stringify(result).slice(0, 500));
    assert.deepEqual(
      result.logs.map((line) => line.text),
      [[inOrder.at(-1), inOrder[0]].join(" "), ...hostile.map(() => "invalid_operation")],
    );
    assert.equal(result.plan.preview.counts.moved, 1);
  });
});
