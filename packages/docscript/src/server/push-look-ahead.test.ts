/**
 * A push is judged once: what its check looks up first (the rows it touched as they were, then the
 * reach of its check) is read from the store before it is judged, instead of judging it, throwing the
 * judgement away for each level of lookups the projection lacked and judging it again.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Logger } from "@tackle/core";
import { LoroDoc, type LoroMap } from "loro-crdt";
import { largeTimeline } from "../../test/large-timeline.ts";
import { timelineSchema } from "../timeline/timeline-schema.ts";
import { DocumentHost } from "./document-host.ts";
import { createSqliteDocumentStore } from "./sqlite-document-store.ts";

/** The rounds and fills each push was judged in, as the host logs them. */
function judgedLog(): { logger: Logger; judged: { rounds: number; fills: number }[] } {
  const judged: { rounds: number; fills: number }[] = [];
  const ignore = () => {};
  return {
    judged,
    logger: {
      debug(message, fields) {
        if (message === "docscript: push judged")
          judged.push({ rounds: Number(fields?.rounds), fills: Number(fields?.fills) });
      },
      info: ignore,
      warn: ignore,
      error: ignore,
    },
  };
}

/**
 * A document of `extraClips` more clips created on a host that logs its judgements, a client's copy of
 * it, and the host's projection forgotten: opened anew, it holds none of the rows a push touches.
 */
async function openedAnew(extraClips: number) {
  const store = createSqliteDocumentStore({ path: ":memory:" });
  const { logger, judged } = judgedLog();
  const host = new DocumentHost({ store, schema: timelineSchema, logger });
  const { snapshot, firstClips } = largeTimeline(extraClips);
  assert.equal(await host.create("doc", "token-0123456789abcdef", snapshot), true);
  const client = LoroDoc.fromSnapshot((await host.snapshot("doc")).bytes);
  host.forget();
  return { store, host, judged, client, firstClips };
}

/** The markers' fields maps of the clips `clipIds`, in the client's document. */
function markerFields(client: LoroDoc, clipIds: readonly string[]): LoroMap[] {
  return clipIds.map((clipId) => {
    const slots = (client.getMap("entities").get(clipId) as LoroMap).get("slots") as LoroMap;
    return (slots.get("marker") as LoroMap).get("fields") as LoroMap;
  });
}

test("a push of many markers' starts to a document just opened is judged once, its lookups read ahead", async () => {
  const { store, host, judged, client, firstClips } = await openedAnew(10);
  try {
    const from = client.oplogVersion();
    for (const [index, fields] of markerFields(client, firstClips).entries())
      fields.set("startMs", 60_000 + index * 1000);
    client.commit();
    const result = await host.push("doc", client.export({ mode: "update", from }));
    assert.equal(result.status, "committed", JSON.stringify(result));
    // The rows, then the markers' claims and variants: two fills, one judgement.
    assert.deepEqual(judged, [{ rounds: 1, fills: 2 }]);
    // Stored as Loro holds them.
    const stored = await store.readRows("doc", { root: "entities", ids: [...firstClips], limit: 100 });
    assert.equal(stored.length, firstClips.length);
    for (const row of stored)
      assert.deepEqual(row.json, (client.getMap("entities").get(row.rowId) as LoroMap).toJSON());
  } finally {
    await host.close();
  }
});

test("a push that is not of fields alone is judged with the same answer when its lookups are read ahead", async () => {
  const { store, host, judged, client, firstClips } = await openedAnew(4);
  try {
    // A clip's kind made unknown: the whole reach is checked, and the schema refuses it.
    const from = client.oplogVersion();
    (client.getMap("entities").get(firstClips[0] as string) as LoroMap).set("kind", "no-such-kind");
    markerFields(client, firstClips.slice(1)).forEach((fields) => {
      fields.set("startMs", 90_000);
    });
    client.commit();
    const result = await host.push("doc", client.export({ mode: "update", from }));
    assert.equal(result.status, "rejected", JSON.stringify(result));
    assert.equal(judged.length, 1, "judged once it lacked nothing");
    const [row] = await store.readRows("doc", { root: "entities", ids: [firstClips[0] as string], limit: 1 });
    assert.equal((row?.json as { kind?: unknown } | undefined)?.kind, "clip");
  } finally {
    await host.close();
  }
});
