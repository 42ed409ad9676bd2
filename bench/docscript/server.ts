/**
 * Document server bench: push-validation latency and snapshot size/time at 1k, 10k and 100k entities,
 * beside the baseline a naive server pays per push: import the whole snapshot, apply the update, read
 * and check the whole document.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/docscript/server.ts [sizes...]
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LoroDoc, LoroMap } from "loro-crdt";
import { interpretDocument, timelineSchema } from "../../packages/docscript/src/index.ts";
import { createSqliteDocumentStore, DocumentHost } from "../../packages/docscript/src/server/index.ts";

const sizes = process.argv
  .slice(2)
  .map(Number)
  .filter((size) => size > 0);
const entityCounts = sizes.length > 0 ? sizes : [1_000, 10_000, 100_000];
const pushes = 30;

/** A valid timeline document of about `count` entities: clips with embedded markers, audio, tracks. */
function buildDocument(count: number): { doc: LoroDoc; clipIds: string[] } {
  const doc = new LoroDoc();
  doc.setPeerId(1);
  const entities = doc.getMap("entities");
  const relations = doc.getMap("relations");
  const audioCount = Math.max(1, Math.floor(count / 100));
  const trackCount = Math.max(1, Math.floor(count / 2000));
  const clipCount = Math.floor((count - audioCount - trackCount) / 2);
  for (let index = 0; index < trackCount; index++) {
    const row = entities.setContainer(`track-${index}`, new LoroMap());
    row.set("kind", "track");
    const fields = row.setContainer("fields", new LoroMap());
    for (const [key, value] of Object.entries({ role: "video", name: null, muted: false, volume: 0 }))
      fields.set(key, value);
  }
  for (let index = 0; index < audioCount; index++) {
    const row = entities.setContainer(`audio-${index}`, new LoroMap());
    row.set("kind", "audio");
    const fields = row.setContainer("fields", new LoroMap());
    const payload = {
      system: "files",
      key: `file-${index}`,
      name: null,
      durationMs: 60_000,
      storageKey: null,
      digest: null,
    };
    for (const [key, value] of Object.entries(payload)) fields.set(key, value);
  }
  const clipIds: string[] = [];
  for (let index = 0; index < clipCount; index++) {
    const clipId = `clip-${index}`;
    clipIds.push(clipId);
    const row = entities.setContainer(clipId, new LoroMap());
    row.set("kind", "clip");
    const fields = row.setContainer("fields", new LoroMap());
    fields.set("name", null);
    fields.set("volume", 0);
    fields.set("speed", 1);
    const slots = row.setContainer("slots", new LoroMap());
    slots.set("content", `audio-${index % audioCount}`);
    const marker = slots.setContainer("marker", new LoroMap());
    marker.set("id", `marker-${index}`);
    marker.set("kind", "sequence-marker");
    const markerFields = marker.setContainer("fields", new LoroMap());
    markerFields.set("startMs", index * 1000);
    markerFields.set("durationMs", 1000);
    markerFields.set("trimStartMs", 0);
    const relation = relations.setContainer(`contain-${index}`, new LoroMap());
    relation.set("kind", "contain");
    relation.set("endpoint0", `track-${index % trackCount}`);
    relation.set("endpoint1", clipId);
    relation.set("position", `${(index + 1).toString(36).padStart(4, "0")}1`);
  }
  doc.commit();
  return { doc, clipIds };
}

function percentile(values: number[], fraction: number): number {
  const sorted = [...values].sort((left, right) => left - right);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))] ?? Number.NaN;
}

const format = (value: number): string => (value >= 100 ? value.toFixed(0) : value.toFixed(1));

const rows: string[] = [];
const directory = await mkdtemp(join(tmpdir(), "docscript-bench-"));
try {
  for (const count of entityCounts) {
    const built = buildDocument(count);
    const exportStart = performance.now();
    const snapshot = built.doc.export({ mode: "snapshot" });
    const exportMs = performance.now() - exportStart;

    const store = createSqliteDocumentStore({ path: join(directory, `bench-${count}.db`) });
    const host = new DocumentHost({ store, schema: timelineSchema, compactEvery: 1_000_000 });
    await store.createDocument({ documentId: "bench", tokenHash: "x", snapshot });
    const loadStart = performance.now();
    await host.snapshot("bench"); // opens the document: snapshot import + one full projection
    const openMs = performance.now() - loadStart;
    const entityTotal = interpretDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema).entities.length;

    const client = LoroDoc.fromSnapshot(snapshot);
    client.setPeerId(2);
    const pushMs: number[] = [];
    const baselineMs: number[] = [];
    let lastUpdate: Uint8Array = new Uint8Array();
    for (let round = 0; round < pushes; round++) {
      const before = client.oplogVersion();
      const clipId = built.clipIds[(round * 7919) % built.clipIds.length] as string;
      ((client.getMap("entities").get(clipId) as LoroMap).get("fields") as LoroMap).set(
        "volume",
        -(round % 12),
      );
      client.commit();
      lastUpdate = client.export({ mode: "update", from: before });
      const start = performance.now();
      const result = await host.push("bench", lastUpdate);
      pushMs.push(performance.now() - start);
      if (result.status !== "committed") throw new Error(`push ${round} ended ${result.status}`);
    }
    // Baseline: what a server without the live projection does per push (fewer rounds at scale: it is slow).
    const baselineRounds = count >= 100_000 ? 2 : 5;
    for (let round = 0; round < baselineRounds; round++) {
      const start = performance.now();
      const doc = LoroDoc.fromSnapshot(snapshot);
      doc.import(lastUpdate);
      const read = interpretDocument(doc, timelineSchema);
      if (read.issues.length > 0) throw new Error(`baseline found issues: ${read.issues[0]?.message}`);
      baselineMs.push(performance.now() - start);
    }
    const push50 = percentile(pushMs, 0.5);
    const baseline50 = percentile(baselineMs, 0.5);
    rows.push(
      `| ${entityTotal.toLocaleString("en")} | ${(snapshot.byteLength / 1024).toFixed(0)} KiB | ${format(exportMs)} | ${format(openMs)} | ${format(push50)} | ${format(percentile(pushMs, 0.95))} | ${format(baseline50)} | ${(baseline50 / push50).toFixed(0)}× |`,
    );
    await store.close();
    process.stderr.write(`${count} done\n`);
  }
} finally {
  await rm(directory, { recursive: true, force: true });
}

console.log(
  `Node ${process.version}, ${pushes} pushes of one clip-volume change per size (SQLite file store, in-process host).\n`,
);
console.log(
  "| entities | snapshot size | snapshot export ms | open (import + project) ms | push check p50 ms | push check p95 ms | full re-import + check ms (baseline) | baseline / push |",
);
console.log("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const row of rows) console.log(row);
