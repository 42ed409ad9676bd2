/**
 * `POST /documents` from a large snapshot (ADR 0554, 0560): the whole create (`DocumentHost.create` over
 * an in-memory SQLite store) timed, with the longest the event loop was held meanwhile (a 10 ms timer's
 * worst lateness), beside the create as ADR 0554 left it in the same run (the history checked in
 * slices, but each span's changed containers read at once, the projection's roots read and the
 * document checked at once, and the rows written in one SQLite transaction), alternated `--runs`
 * times. Two snapshots of N added clips:
 *
 * - `bulk`: `largeTimeline(N)`, its clips written in changes of 10,000 clips (the scale bench's seed);
 * - `history`: the same clips committed as a tool commits them (changes of `--per-change` clips, each
 *   carrying a plan id), then every marker retimed `--retimes` times, so the history holds more ops
 *   than the state (as a real document's does).
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/docscript/create-alone.ts [clips] [--per-change=10] [--retimes=3] [--runs=2]   # 10000
 */

import { performance } from "node:perf_hooks";
import type { DatabaseSync } from "node:sqlite";
import { openMigratedSqlite, sqliteTransaction } from "@tackle/storage";
import { LoroDoc } from "loro-crdt";
import { checkDocument } from "../../packages/docscript/src/document/check-document.ts";
import { projectDocument } from "../../packages/docscript/src/document/interpret.ts";
import { sampleTimelineSnapshot } from "../../packages/docscript/src/module/sample-timeline.ts";
import {
  createSqliteDocumentStore,
  DocumentHost,
  hashToken,
} from "../../packages/docscript/src/server/index.ts";
import { sqliteMigrations } from "../../packages/docscript/src/server/migrations.ts";
import { appliedPlans } from "../../packages/docscript/src/server/push-checks.ts";
import { createdRows } from "../../packages/docscript/src/server/snapshot-checks.ts";
import { historyReasons, yieldToEventLoop } from "../../packages/docscript/src/server/snapshot-history.ts";
import { sqlitePlanIndex } from "../../packages/docscript/src/server/sqlite-plan-index.ts";
import { sqliteRowWrites } from "../../packages/docscript/src/server/sqlite-row-writes.ts";
import { timelineSchema } from "../../packages/docscript/src/timeline/timeline-schema.ts";
import { largeTimeline } from "../../packages/docscript/test/large-timeline.ts";

const flag = (name: string, fallback: number) => {
  const given = process.argv.find((argument) => argument.startsWith(`--${name}=`));
  return given === undefined ? fallback : Number(given.slice(name.length + 3));
};
const clips = Number(process.argv.slice(2).find((argument) => !argument.startsWith("--")) ?? 10000);
const perChange = flag("per-change", 10);
const retimes = flag("retimes", 3);
const runs = flag("runs", 2);

type Op = { container: string; content: unknown; counter: number };

/** The sample timeline plus `count` clips committed `perChange` to a change, then retimed. */
function historyTimeline(count: number): Uint8Array {
  const doc = LoroDoc.fromSnapshot(sampleTimelineSnapshot());
  const changes: unknown[] = [];
  const markerFields: string[] = [];
  let counter = 0;
  let ops: Op[] = [];
  let changeStart = 0;
  let plan = 0;
  const commit = () => {
    if (ops.length === 0) return;
    changes.push({
      id: `${changeStart}@0`,
      timestamp: 0,
      deps: changeStart === 0 ? [] : [`${changeStart - 1}@0`],
      lamport: changeStart,
      msg: JSON.stringify({ planId: `plan-${plan++}` }),
      ops,
    });
    ops = [];
    changeStart = counter;
  };
  const set = (container: string, key: string, value: unknown) =>
    ops.push({ container, content: { type: "insert", key, value }, counter: counter++ });
  const map = (container: string, key: string): string => {
    const id = `cid:${counter}@0:Map`;
    set(container, key, `🦜:${id}`);
    return id;
  };
  for (let index = 0; index < count; index++) {
    const image = map("cid:root-entities:Map", `bench-image-${index}`);
    set(image, "kind", "image");
    const imageFields = map(image, "fields");
    for (const [key, value] of Object.entries({ system: "files", key: `b-${index}.png`, name: null }))
      set(imageFields, key, value);
    for (const key of ["durationMs", "digest"]) set(imageFields, key, null);
    set(imageFields, "storageKey", `store/b-${index}.png`);
    const clip = map("cid:root-entities:Map", `bench-clip-${index}`);
    set(clip, "kind", "clip");
    const clipFields = map(clip, "fields");
    for (const [key, value] of Object.entries({ name: null, volume: 0, speed: 1 }))
      set(clipFields, key, value);
    const slots = map(clip, "slots");
    set(slots, "content", `bench-image-${index}`);
    const marker = map(slots, "marker");
    set(marker, "id", `bench-marker-${index}`);
    set(marker, "kind", "sequence-marker");
    const fields = map(marker, "fields");
    for (const [key, value] of Object.entries({
      startMs: 8000 + index * 1000,
      durationMs: 1000,
      trimStartMs: 0,
    }))
      set(fields, key, value);
    markerFields.push(fields);
    const contain = map("cid:root-relations:Map", `bench-contain-${index}`);
    const position = `~${(index + 1).toString(36).padStart(5, "0")}1`;
    for (const [key, value] of Object.entries({
      kind: "contain",
      endpoint0: "track-1",
      endpoint1: `bench-clip-${index}`,
      position,
    }))
      set(contain, key, value);
    if ((index + 1) % perChange === 0) commit();
  }
  commit();
  for (let round = 1; round <= retimes; round++) {
    for (const [index, fields] of markerFields.entries()) {
      set(fields, "startMs", 8000 + index * 1000 + round);
      if ((index + 1) % 100 === 0) commit();
    }
    commit();
  }
  doc.importJsonUpdates({ schema_version: 1, start_version: new Map(), peers: ["888000"], changes } as never);
  return doc.export({ mode: "snapshot" });
}

/** `work`'s wall time and the longest a 10 ms timer was late meanwhile (the event loop held). */
async function timed(work: () => Promise<unknown>): Promise<{ ms: number; heldMs: number }> {
  let heldMs = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    heldMs = Math.max(heldMs, now - last - 10);
    last = now;
  }, 10);
  const started = performance.now();
  await work();
  const ms = performance.now() - started;
  clearInterval(timer);
  heldMs = Math.max(heldMs, performance.now() - last - 10);
  return { ms, heldMs };
}

/** The create as ADR 0554 left it: the projection, the check and the rows' one transaction at once. */
async function createAsBefore(database: DatabaseSync, documentId: string, snapshot: Uint8Array) {
  const doc = LoroDoc.fromSnapshot(snapshot);
  const reasons = await historyReasons(doc, Number.POSITIVE_INFINITY);
  if (reasons.length > 0) throw new Error("refused");
  await yieldToEventLoop();
  const projection = projectDocument(doc, timelineSchema);
  await yieldToEventLoop();
  if (checkDocument(projection).length > 0) throw new Error("refused");
  const rows = await createdRows(doc, projection);
  await yieldToEventLoop();
  const plans = appliedPlans(doc);
  await yieldToEventLoop();
  const stored = doc.export({ mode: "snapshot" });
  const { writeRows } = sqliteRowWrites(database);
  const planIndex = sqlitePlanIndex(database);
  sqliteTransaction(database, () => {
    database
      .prepare(
        "INSERT INTO docscript_documents (document_id, token_hash, snapshot_seq, snapshot_version, created_at) VALUES (?, ?, 0, ?, ?)",
      )
      .run(
        documentId,
        hashToken("bench-token-0123456789"),
        doc.oplogVersion().encode(),
        new Date().toISOString(),
      );
    database
      .prepare("INSERT INTO docscript_snapshots (document_id, snapshot) VALUES (?, ?)")
      .run(documentId, stored);
    writeRows(documentId, rows, 0);
    database
      .prepare(
        "INSERT INTO docscript_projection (document_id, rows_seq, issues, numbers_indexed) VALUES (?, 0, '[]', 1)",
      )
      .run(documentId);
    planIndex.recordPlans(documentId, plans);
    planIndex.markIndexed(documentId);
  });
}

const snapshots = { bulk: largeTimeline(clips).snapshot, history: historyTimeline(clips) };
const store = createSqliteDocumentStore({ path: ":memory:" });
const host = new DocumentHost({ store, schema: timelineSchema });
// The create as before writes into a store of its own, as the store's one transaction did.
const before = openMigratedSqlite({
  path: ":memory:",
  synchronous: "full",
  store: "docscript",
  migrations: sqliteMigrations,
});
try {
  for (const [name, snapshot] of Object.entries(snapshots)) {
    const changes = LoroDoc.fromSnapshot(snapshot).changeCount();
    const label = `${name} ${clips} clips, ${(snapshot.byteLength / 1e6).toFixed(1)} MB, ${changes} changes`;
    for (let run = 0; run < runs; run++) {
      const asBefore = await timed(() => createAsBefore(before, `${name}-before-${run}`, snapshot));
      const now = await timed(() => host.create(`${name}-${run}`, "bench-token-0123456789", snapshot));
      console.log(
        `${label}, run ${run + 1}: create as before ${asBefore.ms.toFixed(0)} ms (held ${asBefore.heldMs.toFixed(0)}), ` +
          `now ${now.ms.toFixed(0)} ms (held ${now.heldMs.toFixed(0)})`,
      );
    }
  }
} finally {
  await store.close();
  before.close();
}
