/**
 * Edit-script bench: `run-edit-script` latency (p50, p99) for a ten-write script on 1k- and 10k-entity
 * timeline documents, warm (a warm worker) and cold (a worker booted for the run), and `commit-plan`
 * latency, each beside the same edit applied directly with Loro in the same run, as an overhead ratio.
 * Warm runs are measured three ways: at an unchanged version (the worker's kept document), after another
 * client's commit (the worker catches up by the updates since), and with nothing kept (`cachedDocuments:
 * 0`: every run reads the whole document, as before ADR 0450). Everything goes through a real document
 * server on loopback (SQLite in a temp dir).
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/docscript/edit-script.ts [entityCounts...]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LoroDoc, LoroMap } from "loro-crdt";
import { openDocument } from "../../packages/docscript/src/document/document-session.ts";
import { projectDocument } from "../../packages/docscript/src/document/interpret.ts";
import {
  createDocScriptTool,
  createDocumentClient,
  type DocScriptTool,
  interpretDocument,
} from "../../packages/docscript/src/index.ts";
import { sampleTimelineSnapshot } from "../../packages/docscript/src/module/sample-timeline.ts";
import { createSqliteDocumentStore, serveDocuments } from "../../packages/docscript/src/server/index.ts";
import { timelineSchema } from "../../packages/docscript/src/timeline/timeline-schema.ts";

const requested = process.argv
  .slice(2)
  .map(Number)
  .filter((count) => count > 0);
const entityCounts = requested.length > 0 ? requested : [1_000, 10_000];
const warmRuns = 30;
const updatedRuns = 15;
const uncachedRuns = 10;
const coldRuns = 8;
const commitRuns = 15;
const openRuns = 10;
const adminToken = "bench-admin-token-0123456789";
const token = "bench-document-token-0123456789";

/** Ten writes: the first ten clips on the video track get a new volume. */
const tenWrites = (
  volume: number,
) => `const video = entities.list({ entityKind: 'track' }).find((t) => t.payload.role === 'video');
const held = relations.of(video.entityId, 'contain').filter((r) => r.endpoint0EntityId === video.entityId).slice(0, 10);
for (const relation of held) entities.update(relation.endpoint1EntityId, [{ op: 'set', path: ['volume'], value: ${volume} }]);`;

function percentile(samples: number[], fraction: number): number {
  const sorted = [...samples].sort((left, right) => left - right);
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)] ?? Number.NaN;
}

async function time(runs: number, body: (index: number) => Promise<void>): Promise<number[]> {
  const samples: number[] = [];
  for (let index = 0; index < runs; index++) {
    const started = performance.now();
    await body(index);
    samples.push(performance.now() - started);
  }
  return samples;
}

/** The same ten writes straight on Loro: import the snapshot, set ten clip volumes, export the update. */
function directEdit(snapshot: Uint8Array, clipIds: readonly string[], volume: number): Uint8Array {
  const doc = LoroDoc.fromSnapshot(snapshot);
  const before = doc.oplogVersion();
  const entities = doc.getMap("entities");
  for (const clipId of clipIds)
    ((entities.get(clipId) as LoroMap).get("fields") as LoroMap).set("volume", volume);
  doc.commit();
  return doc.export({ mode: "update", from: before });
}

function expectOk(result: Awaited<ReturnType<DocScriptTool["handle"]>>): { plan_id: string } {
  if (!result.ok || result.op !== "run-edit-script")
    throw new Error(`run failed: ${JSON.stringify(result).slice(0, 400)}`);
  return result;
}

const rows: string[] = [];
/**
 * The sample timeline plus `extraClips` image clips on its video track, written straight into Loro in the
 * document's layout (building 10k entities through the checked session would dominate the bench's time).
 */
function benchSnapshot(extraClips: number): Uint8Array {
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
  const issues = interpretDocument(doc, timelineSchema).issues;
  if (issues.length > 0)
    throw new Error(`the bench document does not project: ${JSON.stringify(issues.slice(0, 3))}`);
  return doc.export({ mode: "snapshot" });
}

const snapshots = new Map<number, Uint8Array>();
for (const count of entityCounts) {
  // The sample holds 12 entities; each extra clip adds three (image, clip, marker).
  const extraClips = Math.max(0, Math.round((count - 12) / 3));
  const built = performance.now();
  const snapshot = benchSnapshot(extraClips);
  process.stderr.write(
    `built ${count} entities in ${Math.round(performance.now() - built)} ms (${snapshot.byteLength} bytes)\n`,
  );
  snapshots.set(count, snapshot);
}

const directory = mkdtempSync(join(tmpdir(), "docscript-bench-"));
const server = await serveDocuments({
  store: createSqliteDocumentStore({ path: join(directory, "bench.sqlite") }),
  schema: timelineSchema,
  adminToken,
});
const client = createDocumentClient({ origin: server.url, token });
try {
  for (const count of entityCounts) {
    const snapshot = snapshots.get(count)!;
    const docId = `bench-${count}`;
    // Created on the host directly: setup, not what is measured.
    await server.host.create(docId, token, snapshot);
    const probe = LoroDoc.fromSnapshot(snapshot);
    const relations = probe.getMap("relations").toJSON() as Record<
      string,
      { kind: string; endpoint0: string; endpoint1: string; position?: string }
    >;
    const videoClipIds = Object.values(relations)
      .filter((relation) => relation.kind === "contain" && relation.endpoint0 === "track-1")
      .sort((left, right) => ((left.position ?? "") < (right.position ?? "") ? -1 : 1))
      .slice(0, 10)
      .map((relation) => relation.endpoint1);

    const warmTool = createDocScriptTool({
      httpOrigin: server.url,
      authToken: token,
      documents: [docId],
      sandbox: { workers: 1, maxRunsPerWorker: 1000 },
    });
    expectOk(await warmTool.handle({ op: "run-edit-script", doc_id: docId, script: tenWrites(-1) }));
    const warm = await time(warmRuns, async (index) => {
      expectOk(
        await warmTool.handle({ op: "run-edit-script", doc_id: docId, script: tenWrites(-(index % 50) - 1) }),
      );
    });
    // Another client commits one small change before each run: the worker catches up by the updates since.
    const otherReplica = new LoroDoc();
    await client.pullInto(docId, otherReplica);
    const lastClipId = videoClipIds.at(-1)!;
    const otherCommit = async (index: number) => {
      await client.pullInto(docId, otherReplica);
      const before = otherReplica.oplogVersion();
      ((otherReplica.getMap("entities").get(lastClipId) as LoroMap).get("fields") as LoroMap).set(
        "speed",
        1 + (index % 10) / 10,
      );
      otherReplica.commit();
      const pushed = await client.push(docId, otherReplica.export({ mode: "update", from: before }));
      if (pushed.status !== "committed") throw new Error(JSON.stringify(pushed));
    };
    const updated: number[] = [];
    for (let index = 0; index < updatedRuns; index++) {
      await otherCommit(index);
      const started = performance.now();
      expectOk(
        await warmTool.handle({ op: "run-edit-script", doc_id: docId, script: tenWrites(-(index % 50) - 1) }),
      );
      updated.push(performance.now() - started);
    }
    // The same warm worker with nothing kept: each run reads the whole document (the path before ADR 0450).
    const uncachedTool = createDocScriptTool({
      httpOrigin: server.url,
      authToken: token,
      documents: [docId],
      sandbox: { workers: 1, maxRunsPerWorker: 1000, cachedDocuments: 0 },
    });
    expectOk(await uncachedTool.handle({ op: "run-edit-script", doc_id: docId, script: tenWrites(-1) }));
    const uncached = await time(uncachedRuns, async (index) => {
      expectOk(
        await uncachedTool.handle({
          op: "run-edit-script",
          doc_id: docId,
          script: tenWrites(-(index % 50) - 1),
        }),
      );
    });
    await uncachedTool.close();
    const direct = await time(warmRuns, async (index) => {
      directEdit(snapshot, videoClipIds, -(index % 50) - 1);
    });
    // The floor of a warm run: the document already open in Loro, ten sets, the update exported.
    const open = LoroDoc.fromSnapshot(snapshot);
    const directOpen = await time(warmRuns, async (index) => {
      const before = open.oplogVersion();
      const entities = open.getMap("entities");
      for (const clipId of videoClipIds)
        ((entities.get(clipId) as LoroMap).get("fields") as LoroMap).set("volume", -(index % 50) - 1);
      open.commit();
      open.export({ mode: "update", from: before });
    });
    // Where a run's time went before: opening the document session by reading every row into its index;
    // and what a warm run does instead: fork the kept document and start from a copy of its projection.
    const opening = await time(openRuns, async () => {
      openDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema, { role: "script" });
    });
    const kept = LoroDoc.fromSnapshot(snapshot);
    const keptProjection = projectDocument(kept, timelineSchema);
    const openingKept = await time(openRuns, async () => {
      openDocument(kept.fork(), timelineSchema, { role: "script", projection: keptProjection });
    });
    const cold = await time(coldRuns, async () => {
      const coldTool = createDocScriptTool({
        httpOrigin: server.url,
        authToken: token,
        documents: [docId],
        sandbox: { workers: 0 },
      });
      expectOk(await coldTool.handle({ op: "run-edit-script", doc_id: docId, script: tenWrites(-7) }));
      await coldTool.close();
    });
    const commitSamples: number[] = [];
    for (let index = 0; index < commitRuns; index++) {
      const run = expectOk(
        await warmTool.handle({ op: "run-edit-script", doc_id: docId, script: tenWrites(-(index % 40) - 2) }),
      );
      const started = performance.now();
      const commit = await warmTool.handle({ op: "commit-plan", doc_id: docId, plan_id: run.plan_id });
      commitSamples.push(performance.now() - started);
      if (!commit.ok || commit.op !== "commit-plan" || commit.status !== "committed")
        throw new Error(JSON.stringify(commit));
    }
    await warmTool.close();
    // The same publish done by hand: bring a kept replica up to date, set the ten volumes, push the update.
    const replica = new LoroDoc();
    await client.pullInto(docId, replica);
    const directPush = await time(commitRuns, async (index) => {
      await client.pullInto(docId, replica);
      const before = replica.oplogVersion();
      const entities = replica.getMap("entities");
      for (const clipId of videoClipIds)
        ((entities.get(clipId) as LoroMap).get("fields") as LoroMap).set("volume", -(index % 40) - 3);
      replica.commit();
      const result = await client.push(docId, replica.export({ mode: "update", from: before }));
      if (result.status !== "committed") throw new Error(JSON.stringify(result));
    });
    const line = (what: string, samples: number[], baseline: number[], baselineName: string) => {
      const p50 = percentile(samples, 0.5);
      const p99 = percentile(samples, 0.99);
      const base50 = percentile(baseline, 0.5);
      rows.push(
        `| ${count.toLocaleString("en")} | ${what} | ${p50.toFixed(1)} | ${p99.toFixed(1)} | ${baselineName} | ${base50.toFixed(1)} | ${percentile(baseline, 0.99).toFixed(1)} | ${(p50 / base50).toFixed(1)}× |`,
      );
    };
    const loro = "Loro: import + 10 sets + export";
    line(`run-edit-script, warm, unchanged version (${warmRuns} runs)`, warm, direct, loro);
    line(`run-edit-script, warm, after another client's commit (${updatedRuns} runs)`, updated, direct, loro);
    line(`run-edit-script, warm, nothing kept (${uncachedRuns} runs)`, uncached, direct, loro);
    line(`open a session: fork + kept projection (${openRuns} runs)`, openingKept, direct, loro);
    line(`open a session: read the whole document (${openRuns} runs)`, opening, direct, loro);
    line(`run-edit-script, cold (${coldRuns} runs)`, cold, direct, loro);
    rows.push(
      `| ${count.toLocaleString("en")} | floor: Loro, document already open, 10 sets + export, nothing checked (${warmRuns} runs) | ${percentile(directOpen, 0.5).toFixed(2)} | ${percentile(directOpen, 0.99).toFixed(2)} | | | | |`,
    );
    line(`commit-plan (${commitRuns} runs)`, commitSamples, directPush, "client: pull + 10 Loro sets + push");
  }
} finally {
  await server.close();
  rmSync(directory, { recursive: true, force: true });
}

console.log(
  `| entities | operation | p50 ms | p99 ms | baseline | baseline p50 ms | baseline p99 ms | overhead (p50) |`,
);
console.log(`| ---: | --- | ---: | ---: | --- | ---: | ---: | ---: |`);
for (const row of rows) console.log(row);
