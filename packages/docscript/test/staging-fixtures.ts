/**
 * What the tests of staged parts share (push-stage, staged-patches, detached-staging): a host holding
 * a document as a run's pull opens it, a client's copy writing on its own peer, the markers' fields a
 * run of field writes sets, a client's ops cut into parts, and the rows the store holds.
 */
import assert from "node:assert/strict";
import type { Logger } from "@tackle/core";
import { LoroDoc, type LoroMap } from "loro-crdt";
import { DocumentHost } from "../src/server/document-host.ts";
import type { DocumentStore } from "../src/server/document-store.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";

export const token = "token-0123456789abcdef";
export const maxBytes = 16 * 2 ** 20;

/** The fields the host logs with each push it judged ("docscript: push judged"). */
export type JudgedFields = Readonly<Record<string, unknown>>;

/**
 * A host over `store` holding `snapshot` as `doc`, opened as a run's pull opens it; `judged` is told
 * the fields of each push the host judged.
 */
export async function hostHolding(
  store: DocumentStore,
  snapshot: Uint8Array,
  judged: (fields: JudgedFields) => void = () => {},
): Promise<DocumentHost> {
  const ignore = () => {};
  const logger: Logger = {
    debug(message, fields) {
      if (message === "docscript: push judged") judged(fields ?? {});
    },
    info: ignore,
    warn: ignore,
    error: ignore,
  };
  const host = new DocumentHost({ store, schema: timelineSchema, logger });
  assert.equal(await host.create("doc", token, snapshot), true);
  await host.snapshot("doc");
  return host;
}

/** A client's copy writing on peer `peer`. */
export function clientOf(snapshot: Uint8Array, peer: number): LoroDoc {
  const client = LoroDoc.fromSnapshot(snapshot);
  client.setPeerId(peer);
  return client;
}

/** The row of the `index`th added clip (`largeTimeline`'s). */
export function clipRowOf(client: LoroDoc, index: number): LoroMap {
  return client.getMap("entities").get(`large-clip-${index}`) as LoroMap;
}

/** The fields of the `index`th added clip's marker. */
export function markerFieldsOf(client: LoroDoc, index: number): LoroMap {
  const slots = clipRowOf(client, index).get("slots") as LoroMap;
  return (slots.get("marker") as LoroMap).get("fields") as LoroMap;
}

/** `client`'s ops on its peer from `from` to `to` (default: all it wrote), in parts of `size` atoms. */
export function partsOf(client: LoroDoc, from: number, size: number, to?: number): Uint8Array[] {
  const peer = client.peerIdStr;
  const end = to ?? client.oplogVersion().get(peer) ?? 0;
  const parts: Uint8Array[] = [];
  for (let counter = from; counter < end; counter += size) {
    const spans = [{ id: { peer, counter }, len: Math.min(size, end - counter) }];
    parts.push(client.export({ mode: "updates-in-range", spans }));
  }
  return parts;
}

/** The store's `entities` rows of `doc`, by row id. */
export async function storedRowsOf(store: DocumentStore): Promise<Map<string, unknown>> {
  const rows = await store.readRows("doc", { root: "entities", limit: 10_000 });
  return new Map(rows.map((row) => [row.rowId, row.json]));
}
