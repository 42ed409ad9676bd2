/**
 * A large valid `timeline` document, fast: the sample timeline plus `extraClips` image clips (image,
 * clip, its embedded marker, a `contain` from the video track) written as one Loro JSON update and
 * imported in one call (op by op through the Loro API, 100k entities take about a minute).
 */
import { LoroDoc } from "loro-crdt";
import { projectDocument } from "../src/document/interpret.ts";
import { sampleTimelineSnapshot } from "../src/module/sample-timeline.ts";
import { DocumentHost, hashToken } from "../src/server/document-host.ts";
import type { ContainerEntry, RowChange } from "../src/server/document-store.ts";
import { mapsOfRows } from "../src/server/row-containers.ts";
import { allRowChanges, membersOfRow } from "../src/server/row-members.ts";
import { createSqliteDocumentStore } from "../src/server/sqlite-document-store.ts";
import { timelineSchema } from "../src/timeline/timeline-schema.ts";

type Row = { readonly [key: string]: string | number | boolean | null | Row };

export interface LargeTimeline {
  readonly snapshot: Uint8Array;
  /** Entities in the document. */
  readonly entityCount: number;
  /** The first ten added clips (on the video track, `track-1`). */
  readonly firstClips: readonly string[];
}

/**
 * `overlayEvery`: every that many-th added clip goes on an overlay track of its own
 * (`large-track-overlay`, one more entity) instead of the video track.
 */
export function largeTimeline(extraClips: number, overlayEvery?: number): LargeTimeline {
  const doc = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
  const firstClips: string[] = [];
  // Chunks of 10k clips, each a change of its own peer, concurrent with the rest: the keys never meet.
  for (let start = 0; start < extraClips; start += clipsPerChunk) {
    const last = Math.min(extraClips, start + clipsPerChunk);
    addClips(doc, start, last, firstClips, firstPeer + start / clipsPerChunk, overlayEvery, start === 0);
  }
  const tracks = overlayEvery === undefined ? 0 : 1;
  return {
    snapshot: doc.export({ mode: "snapshot" }),
    entityCount: 12 + tracks + extraClips * 3,
    firstClips,
  };
}

/**
 * A document host over an in-memory SQLite store holding `largeTimeline(extraClips, overlayEvery)` as
 * "doc", stored as the scale bench seeds it (its rows written out beside the snapshot, not read from
 * it), and a replica of the stored document.
 */
export async function largeTimelineHost(
  extraClips: number,
  overlayEvery?: number,
): Promise<{ host: DocumentHost; replica: LoroDoc }> {
  const { snapshot } = largeTimeline(extraClips, overlayEvery);
  const store = createSqliteDocumentStore({ path: ":memory:" });
  const host = new DocumentHost({ store, schema: timelineSchema });
  await store.createDocument({
    documentId: "doc",
    tokenHash: hashToken("token-0123456789abcdef"),
    snapshot,
    rows: largeTimelineRows(extraClips, overlayEvery),
    issues: [],
  });
  return { host, replica: LoroDoc.fromSnapshot((await host.snapshot("doc")).bytes) };
}

/** Clips per change, and the first change's peer (each next chunk's is one more). */
const clipsPerChunk = 10_000;
const firstPeer = 777_000;

/** The overlay track `overlayEvery` puts clips on. */
export const overlayTrackId = "large-track-overlay";
const overlayTrackRow = {
  root: "entities" as const,
  rowId: overlayTrackId,
  json: { kind: "track", fields: { role: "overlay", name: "Overlay", muted: false, volume: 0 } },
};

/** The three rows one added clip brings: its image, the clip (marker embedded) and its `contain`. */
function clipRows(
  index: number,
  overlayEvery?: number,
): { root: "entities" | "relations"; rowId: string; json: Row }[] {
  const clipId = `large-clip-${index}`;
  const trackId =
    overlayEvery !== undefined && index % overlayEvery === overlayEvery - 1 ? overlayTrackId : "track-1";
  return [
    {
      root: "entities",
      rowId: `large-image-${index}`,
      json: {
        kind: "image",
        fields: {
          system: "files",
          key: `large-${index}.png`,
          name: null,
          durationMs: null,
          storageKey: `store/large-${index}.png`,
          digest: null,
        },
      },
    },
    {
      root: "entities",
      rowId: clipId,
      json: {
        kind: "clip",
        fields: { name: null, volume: 0, speed: 1 },
        slots: {
          content: `large-image-${index}`,
          marker: {
            id: `large-marker-${index}`,
            kind: "sequence-marker",
            fields: { startMs: 8000 + index * 1000, durationMs: 1000, trimStartMs: 0 },
          },
        },
      },
    },
    {
      root: "relations",
      rowId: `large-contain-${index}`,
      json: {
        kind: "contain",
        endpoint0: trackId,
        endpoint1: clipId,
        position: `~${(index + 1).toString(36).padStart(5, "0")}1`,
      },
    },
  ];
}

/**
 * The rows `largeTimeline(extraClips)` projects to, with their members, written out from the same
 * rows it writes into Loro (no read of the document: a million entities project in minutes). The
 * sample's own rows are read from it.
 */
export function largeTimelineRows(extraClips: number, overlayEvery?: number): RowChange[] {
  const sample = allRowChanges(
    projectDocument(LoroDoc.fromSnapshot(sampleTimelineSnapshot()), timelineSchema),
  );
  const rows: RowChange[] = [...sample];
  if (overlayEvery !== undefined)
    rows.push({
      ...overlayTrackRow,
      members: membersOfRow(
        timelineSchema,
        overlayTrackRow.root,
        overlayTrackRow.rowId,
        overlayTrackRow.json,
      ),
    });
  // Each row's maps, with the ids `addClips` gives them (ADR 0514): counted as it counts its ops, per chunk.
  const ids = { counter: 0, peer: firstPeer };
  const sampleMaps = mapsOfRows(LoroDoc.fromSnapshot(sampleTimelineSnapshot()));
  for (const [index, row] of rows.entries()) {
    const maps =
      index < sample.length ? sampleMaps(row.root, row.rowId) : mapsOfWritten(row.json as Row, ids);
    if (maps !== undefined) rows[index] = { ...row, containers: maps };
  }
  for (let index = 0; index < extraClips; index++) {
    if (index % clipsPerChunk === 0 && index > 0)
      Object.assign(ids, { counter: 0, peer: firstPeer + index / clipsPerChunk });
    for (const row of clipRows(index, overlayEvery))
      rows.push({
        ...row,
        members: membersOfRow(timelineSchema, row.root, row.rowId, row.json),
        containers: mapsOfWritten(row.json, ids),
      });
  }
  return rows;
}

/** The maps `write` in `addClips` makes for a row, each op counted as it counts them. */
function mapsOfWritten(json: Row, ids: { counter: number; peer: number }): ContainerEntry[] {
  const maps: ContainerEntry[] = [];
  const walk = (value: Row, path: readonly string[]) => {
    maps.push([`cid:${ids.counter++}@${ids.peer}:Map`, path]);
    for (const [name, inner] of Object.entries(value)) {
      if (typeof inner === "object" && inner !== null) walk(inner, [...path, name]);
      else ids.counter++;
    }
  };
  walk(json, []);
  return maps;
}

function addClips(
  doc: LoroDoc,
  from: number,
  to: number,
  firstClips: string[],
  peer: number,
  overlayEvery: number | undefined,
  withTrack: boolean,
): void {
  const ops: { container: string; content: unknown; counter: number }[] = [];
  let counter = 0;
  const write = (container: string, key: string, value: Row[string]) => {
    if (typeof value === "object" && value !== null) {
      const id = `cid:${counter}@0:Map`;
      ops.push({ container, content: { type: "insert", key, value: `🦜:${id}` }, counter: counter++ });
      for (const [name, inner] of Object.entries(value)) write(id, name, inner);
      return;
    }
    ops.push({ container, content: { type: "insert", key, value }, counter: counter++ });
  };
  const roots = { entities: "cid:root-entities:Map", relations: "cid:root-relations:Map" };
  if (withTrack && overlayEvery !== undefined)
    write(roots[overlayTrackRow.root], overlayTrackRow.rowId, overlayTrackRow.json);
  for (let index = from; index < to; index++) {
    if (firstClips.length < 10) firstClips.push(`large-clip-${index}`);
    for (const row of clipRows(index, overlayEvery)) write(roots[row.root], row.rowId, row.json);
  }
  doc.importJsonUpdates({
    schema_version: 1,
    start_version: new Map(),
    peers: [String(peer)],
    changes: [{ id: "0@0", timestamp: 0, deps: [], lamport: 0, msg: null, ops }],
  } as never);
}
