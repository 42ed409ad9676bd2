/**
 * Engines bench: the same warm ten-write edit script on the same timeline document, run by the sandbox's
 * engine (QuickJS compiled to WebAssembly, inside the worker: ADR 0434) and by the previous engine (a
 * `vm` context in the worker's own V8 realm, kept in `previous-engine/` only for this comparison), side by
 * side in one run, at 1k and 10k entities. Each pool has one warm worker that keeps the document between
 * runs (ADR 0450), so a run costs the engine, the bridge and the plan, not reading the document.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/docscript/engines.ts [entityCounts...]
 */
import { LoroDoc, LoroMap } from "loro-crdt";
import { sampleTimelineSnapshot } from "../../packages/docscript/src/module/sample-timeline.ts";
import { createEditScriptPool } from "../../packages/docscript/src/tool/create-edit-script-pool.ts";
import { documentVersion } from "../../packages/docscript/src/tool/document-cache.ts";
import { runEditScript } from "../../packages/docscript/src/tool/run-edit-script.ts";

const requested = process.argv
  .slice(2)
  .map(Number)
  .filter((count) => count > 0);
const entityCounts = requested.length > 0 ? requested : [1_000, 10_000];
const warmRuns = 40;

/** Ten writes: the first ten clips on the video track get a new volume. */
const tenWrites = (
  volume: number,
) => `const video = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'video');
const held = relations.of(video.entityId, 'contain').filter((r) => r.endpoint0EntityId === video.entityId).slice(0, 10);
for (const relation of held) entities.update(relation.endpoint1EntityId, [{ op: 'set', path: ['volume'], value: ${volume} }]);`;

/** The sample timeline plus `extraClips` image clips (image, clip, marker, contain) on its video track. */
function benchDocument(extraClips: number): LoroDoc {
  const doc = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
  doc.setPeerId(2);
  const entities = doc.getMap("entities");
  const relations = doc.getMap("relations");
  const existing = Object.values(
    relations.toJSON() as Record<string, { endpoint0: string; position?: string }>,
  )
    .filter((relation) => relation.endpoint0 === "track-1")
    .map((relation) => relation.position ?? "")
    .sort();
  const last = existing.at(-1) ?? "";
  const write = (map: LoroMap, values: Record<string, unknown>) => {
    for (const [key, value] of Object.entries(values)) map.set(key, value);
  };
  for (let index = 0; index < extraClips; index++) {
    const imageId = `bench-image-${index}`;
    const image = entities.setContainer(imageId, new LoroMap());
    image.set("kind", "image");
    write(image.setContainer("fields", new LoroMap()), {
      system: "files",
      key: `bench-${index}.png`,
      name: null,
      durationMs: null,
      storageKey: `store/bench-${index}.png`,
      digest: null,
    });
    const clipId = `bench-clip-${index}`;
    const clip = entities.setContainer(clipId, new LoroMap());
    clip.set("kind", "clip");
    write(clip.setContainer("fields", new LoroMap()), { name: null, volume: 0, speed: 1 });
    const slots = clip.setContainer("slots", new LoroMap());
    slots.set("content", imageId);
    const marker = slots.setContainer("marker", new LoroMap());
    marker.set("id", `bench-marker-${index}`);
    marker.set("kind", "sequence-marker");
    write(marker.setContainer("fields", new LoroMap()), {
      startMs: 8000 + index * 1000,
      durationMs: 1000,
      trimStartMs: 0,
    });
    const relation = relations.setContainer(`bench-contain-${index}`, new LoroMap());
    write(relation, {
      kind: "contain",
      endpoint0: "track-1",
      endpoint1: clipId,
      position: `${last}${(index + 1).toString(36).padStart(4, "0")}1`,
    });
  }
  doc.commit();
  return doc;
}

function percentile(samples: number[], fraction: number): number {
  const sorted = [...samples].sort((left, right) => left - right);
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)] ?? Number.NaN;
}

const extension = import.meta.url.endsWith(".ts") ? ".ts" : ".js";
const schema = {
  module: new URL(`../../packages/docscript/src/timeline/timeline-schema${extension}`, import.meta.url),
  exportName: "timelineSchema",
};
const engines = [
  { name: "QuickJS (WebAssembly) in the worker", workerUrl: undefined },
  {
    name: "previous: vm context in the worker",
    workerUrl: new URL("./previous-engine/vm-worker.ts", import.meta.url),
  },
] as const;

const rows: string[] = [];
for (const count of entityCounts) {
  const replica = benchDocument(Math.max(0, Math.round((count - 12) / 3)));
  const version = documentVersion(replica);
  const p50s: number[] = [];
  for (const engine of engines) {
    const pool = createEditScriptPool({
      size: 1,
      maxRunsPerWorker: 1000,
      ...(engine.workerUrl === undefined ? {} : { workerUrl: engine.workerUrl }),
    });
    const once = async (volume: number) => {
      const result = await runEditScript(
        { pool, schema, hooks: {} },
        { docId: `bench-${count}`, replica, version, script: tenWrites(volume) },
      );
      if (!result.ok) throw new Error(`${engine.name}: ${JSON.stringify(result.error)}`);
    };
    await once(-1);
    await once(-2);
    const samples: number[] = [];
    for (let index = 0; index < warmRuns; index++) {
      const started = performance.now();
      await once(-(index % 50) - 1);
      samples.push(performance.now() - started);
    }
    await pool.close();
    p50s.push(percentile(samples, 0.5));
    rows.push(
      `| ${count.toLocaleString("en")} | ${engine.name} | ${percentile(samples, 0.5).toFixed(1)} | ${percentile(samples, 0.95).toFixed(1)} |`,
    );
  }
  rows.push(
    `| ${count.toLocaleString("en")} | QuickJS / previous (p50) | ${(p50s[0]! / p50s[1]!).toFixed(2)}× | |`,
  );
}
console.log("| entities | engine | warm ten-write run p50 ms | p95 ms |");
console.log("| -------: | :----- | ------------------------: | -----: |");
for (const row of rows) console.log(row);
