/**
 * The container index at work (ADR 0514): a run's parts that only set plain values into maps the
 * store places are staged by patching the stored rows, and what is stored after the push is exactly
 * what a read of the document gives; a row whose maps changed is read out of Loro and indexed anew (a
 * map its row no longer holds is never placed).
 */
import assert from "node:assert/strict";
import { LoroDoc, LoroMap } from "loro-crdt";
import { largeTimeline } from "../../test/large-timeline.ts";
import { describeOnBothStores } from "../../test/on-both-stores.ts";
import {
  clientOf,
  clipRowOf,
  hostHolding,
  markerFieldsOf,
  maxBytes,
  partsOf,
  storedRowsOf,
} from "../../test/staging-fixtures.ts";
import { projectDocument } from "../document/interpret.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import type { DocumentHost } from "./document-host.ts";
import type { DocumentStore } from "./document-store.ts";
import { mapsOfRows } from "./row-containers.ts";
import { allRowChanges } from "./row-members.ts";

/** `client`'s ops on its peer from `from` on, in parts of `size` atoms, each staged. */
async function stageAll(host: DocumentHost, client: LoroDoc, from: number, size: number) {
  for (const part of partsOf(client, from, size)) {
    assert.deepEqual(await host.stage("doc", part, maxBytes), { staged: true });
  }
}

/** The stored rows, and the rows and maps a read of the document's snapshot gives. */
async function storedAndRead(store: DocumentStore, host: DocumentHost) {
  const doc = LoroDoc.fromSnapshot((await host.snapshot("doc")).bytes);
  const read = allRowChanges(projectDocument(doc, timelineSchema), mapsOfRows(doc)).filter(
    (row) => row.root === "entities",
  );
  return {
    stored: await storedRowsOf(store),
    read: new Map(read.map((row) => [row.rowId, row.json])),
    maps: read,
  };
}

describeOnBothStores(
  "field sets staged in parts are patched from the stored rows: stored as a read of the document gives them",
  "staged_patches",
  async (store) => {
    const { snapshot } = largeTimeline(200);
    const host = await hostHolding(store, snapshot);
    try {
      const client = clientOf(snapshot, 51);
      const from = client.oplogVersion();
      for (let index = 0; index < 200; index++) markerFieldsOf(client, index).set("startMs", 70_000 + index);
      // One clip's own fields too, and a marker written twice: the last write wins.
      markerFieldsOf(client, 3).set("startMs", 5);
      (clipRowOf(client, 7).get("fields") as LoroMap).set("volume", 0.5);
      client.commit();
      await stageAll(host, client, 0, 60);
      const answer = await host.push("doc", client.export({ mode: "update", from }));
      assert.equal(answer.status, "committed", JSON.stringify(answer));
      const { stored, read, maps } = await storedAndRead(store, host);
      assert.deepStrictEqual(stored, read);
      assert.equal(
        (stored.get("large-clip-3") as { slots: { marker: { fields: { startMs: number } } } }).slots.marker
          .fields.startMs,
        5,
      );
      // The rows' maps are still placed: the next shift is patched too.
      const ids = maps.flatMap((row) =>
        Array.isArray(row.containers) ? row.containers.map(([id]) => id) : [],
      );
      const places = await store.containerPlaces?.("doc", ids);
      assert.equal(places?.size, ids.length);
      assert.deepEqual(places?.get(markerFieldsOf(client, 9).id), {
        root: "entities",
        rowId: "large-clip-9",
        path: ["slots", "marker", "fields"],
      });
    } finally {
      await host.close();
    }
  },
);

describeOnBothStores(
  "a row whose maps changed is indexed anew: its old map is no longer placed, its new one is",
  "staged_reindex",
  async (store) => {
    const { snapshot } = largeTimeline(50);
    const host = await hostHolding(store, snapshot);
    try {
      const client = clientOf(snapshot, 52);
      const old = markerFieldsOf(client, 4);
      let from = client.oplogVersion();
      // A new fields map for clip 4's marker: the old one is no longer in the row.
      const marker = old.parent() as LoroMap;
      const fresh = marker.setContainer("fields", new LoroMap());
      fresh.set("startMs", 12_000);
      fresh.set("durationMs", 500);
      fresh.set("trimStartMs", 0);
      client.commit();
      assert.equal((await host.push("doc", client.export({ mode: "update", from }))).status, "committed");
      // Its maps were read with it: the new map is placed, the old one not.
      const afterSwap = await store.containerPlaces?.("doc", [old.id, fresh.id]);
      assert.equal(afterSwap?.has(old.id), false);
      assert.deepEqual(afterSwap?.get(fresh.id)?.path, ["slots", "marker", "fields"]);
      // Writes into the new map and beside it, staged: patched through the map now placed.
      from = client.oplogVersion();
      const counter = client.oplogVersion().get(client.peerIdStr) ?? 0;
      fresh.set("startMs", 13_000);
      markerFieldsOf(client, 5).set("startMs", 77_777);
      client.commit();
      await stageAll(host, client, counter, 1);
      assert.equal((await host.push("doc", client.export({ mode: "update", from }))).status, "committed");
      const { stored, read } = await storedAndRead(store, host);
      assert.deepStrictEqual(stored, read);
      const clip4 = stored.get("large-clip-4") as { slots: { marker: { fields: { startMs: number } } } };
      assert.equal(clip4.slots.marker.fields.startMs, 13_000);
    } finally {
      await host.close();
    }
  },
);
