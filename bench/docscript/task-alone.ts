/**
 * One `tasks.ts` task's binding calls in one process, for profiling (`--cpu-prof`): a document host
 * over a copy of the seeded SQLite file answers row lookups directly (no HTTP, no workers), and a
 * run session over a projection that reads rows on demand (ADR 0466) makes the calls the task's
 * script makes, each timed. Prints the calls' times and the rows and requests they read.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/docscript/task-alone.ts <shift|mute|append|move|retime|delete|caption> [entities]
 * `caption` (thousands of calls) prints each binding's totals instead of every call.
 */
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LoroDoc, LoroMap } from "loro-crdt";
import { versionKey } from "../../packages/docscript/src/document/interpret.ts";
import { demandOf, onDemandProjection } from "../../packages/docscript/src/document/on-demand-projection.ts";
import { lookupRowSource } from "../../packages/docscript/src/document/row-source.ts";
import { createSqliteDocumentStore, DocumentHost } from "../../packages/docscript/src/server/index.ts";
import { timelineSchema } from "../../packages/docscript/src/timeline/timeline-schema.ts";
import { documentVersion, makeRunDoc } from "../../packages/docscript/src/tool/document-cache.ts";
import { loroBytes } from "../../packages/docscript/src/tool/host-retained.ts";
import { openRunSession } from "../../packages/docscript/src/tool/run-session.ts";
import { seedFile } from "./scale-harness.ts";

const args = process.argv.slice(2);
const [task = "shift", entities = "100000"] = args.filter((arg) => !arg.startsWith("--"));
const count = Number(entities);
/** Also commits the plan to the host (after a first commit, so the server's first-commit cost is paid). */
const commit = args.includes("--commit");
const { path: seeded } = seedFile(count, 10);
const directory = mkdtempSync(join(tmpdir(), "docscript-task-alone-"));
const path = join(directory, "doc.sqlite");
copyFileSync(seeded, path);
const store = createSqliteDocumentStore({ path });
const host = new DocumentHost({ store, schema: timelineSchema });
try {
  const { bytes } = await host.snapshot("bench");
  const replica = LoroDoc.fromSnapshot(bytes);
  if (commit) {
    // One marker retimed as a committed plan makes it, so the task's commit is not the first.
    const before = replica.oplogVersion();
    const entities = replica.getMap("entities");
    for (const rowId of entities.keys()) {
      const marker = ((entities.get(rowId) as LoroMap).get("slots") as LoroMap | undefined)?.get("marker");
      if (!(marker instanceof LoroMap)) continue;
      (marker.get("fields") as LoroMap).set("startMs", 1);
      break;
    }
    // A row written into each root map, as the tasks before it in `tasks.ts` write (a Loro document
    // decodes a root map whole on the first import that writes to it).
    const track = entities.setContainer("task-alone-track", new LoroMap());
    track.set("kind", "track");
    const fields = track.setContainer("fields", new LoroMap());
    for (const [name, value] of Object.entries({ role: "audio", name: null, muted: false, volume: 0 }))
      fields.set(name, value);
    const derived = replica.getMap("relations").setContainer("task-alone-derived", new LoroMap());
    derived.set("kind", "derived-from");
    derived.set("endpoint0", "large-image-1");
    derived.set("endpoint1", "large-image-2");
    replica.commit({ message: JSON.stringify({ planId: "task-alone-warm" }) });
    const warm = await host.push("bench", replica.export({ mode: "update", from: before }));
    if (warm.status !== "committed") throw new Error(`warm-up commit: ${JSON.stringify(warm).slice(0, 300)}`);
  }
  const base = onDemandProjection(
    timelineSchema,
    lookupRowSource(async (lookups) => {
      const answer = await host.rowLookup("bench", lookups);
      if (process.env.TASK_ALONE_LOOKUPS !== undefined)
        console.log(
          JSON.stringify(lookups).slice(0, 240),
          answer.results.map((result) => result.rows.length),
        );
      return answer;
    }),
    documentVersion(replica),
    20_000,
  );
  // The run doc as the tool's host makes it (its first revert and root-map decodes paid up front).
  const doc = makeRunDoc(replica);
  base.readAt = versionKey(doc);
  const session = openRunSession(
    { docId: "bench", planId: "plan-1", peerId: "77", hooks: { loadEntityAsset: false, uploadText: false } },
    timelineSchema,
    { doc, base, source: "snapshot" },
    { call: () => Promise.resolve(undefined) },
  );
  const remote = demandOf(base);
  const loroAtOpen = loroBytes();
  const heapAtOpen = process.memoryUsage().heapUsed;
  const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
  const memory = () =>
    `Loro +${mib(loroBytes() - loroAtOpen)} MiB, heap +${mib(process.memoryUsage().heapUsed - heapAtOpen)} MiB`;
  /** Per label, for a task of many calls: calls, ms, CPU ms, requests, rows. */
  const totals = new Map<string, number[]>();
  const timed = async (label: string, binding: string, method: string, args: unknown[]) => {
    const requests = remote?.requests ?? 0;
    const rows = remote?.rowsRead ?? 0;
    const start = performance.now();
    const cpu = process.cpuUsage();
    const value = await session.callFilled(binding, method, args);
    const used = process.cpuUsage(cpu);
    if (task === "caption" || task === "deleteOverlay") {
      const sums = totals.get(label) ?? [0, 0, 0, 0, 0];
      const add = [
        1,
        performance.now() - start,
        (used.user + used.system) / 1000,
        (remote?.requests ?? 0) - requests,
        (remote?.rowsRead ?? 0) - rows,
      ];
      totals.set(
        label,
        sums.map((sum, index) => sum + add[index]!),
      );
      return value as never;
    }
    console.log(
      `${label}: ${(performance.now() - start).toFixed(0)} ms (CPU ${((used.user + used.system) / 1000).toFixed(0)} ms), ${(remote?.requests ?? 0) - requests} requests, ${(remote?.rowsRead ?? 0) - rows} rows; ${memory()}`,
    );
    return value as never;
  };
  const started = performance.now();
  if (task === "shift") {
    let after: string | undefined;
    for (;;) {
      const page: { entityId: string; payload: { startMs: number } }[] = await timed(
        "list",
        "entities",
        "list",
        [{ entityKind: "sequence-marker", range: { field: "startMs", from: 30_000 }, limit: 5000, after }],
      );
      if (page.length === 0) break;
      await timed("updateMany", "entities", "updateMany", [
        page.map((m) => ({
          entityId: m.entityId,
          ops: [{ op: "set", path: ["startMs"], value: m.payload.startMs + 2000 }],
        })),
      ]);
      after = page.at(-1)?.entityId;
    }
  } else if (task === "mute") {
    const markers: { entityId: string }[] = await timed("list", "entities", "list", [
      { entityKind: "sequence-marker", range: { field: "startMs", from: 60_000, to: 70_000 } },
    ]);
    for (const marker of markers) {
      const [of]: { endpoint0EntityId: string }[] = await timed("of", "relations", "of", [
        marker.entityId,
        "marker",
      ]);
      await timed("update", "entities", "update", [
        of?.endpoint0EntityId,
        [{ op: "set", path: ["volume"], value: -60 }],
      ]);
    }
  } else if (task === "retime") {
    const captions: { entityId: string; payload: { text: string } }[] = await timed(
      "captions",
      "entities",
      "list",
      [{ entityKind: "caption" }],
    );
    const hello = captions.find((caption) => caption.payload.text === "Hello");
    const [shownBy]: { endpoint0EntityId: string }[] = await timed("of contain", "relations", "of", [
      hello?.entityId,
      "contain",
    ]);
    const [marker]: { endpoint1EntityId: string }[] = await timed("of marker", "relations", "of", [
      shownBy?.endpoint0EntityId,
      "marker",
    ]);
    await timed("update", "entities", "update", [
      marker?.endpoint1EntityId,
      [{ op: "set", path: ["startMs"], value: 1500 }],
    ]);
  } else if (task === "delete") {
    const mediumId = "large-image-7";
    const shown: { endpoint0EntityId: string }[] = await timed("of contain", "relations", "of", [
      mediumId,
      "contain",
    ]);
    for (const relation of shown)
      await timed("delete clip", "entities", "delete", [relation.endpoint0EntityId]);
    const others: { relationId: string }[] = await timed("of", "relations", "of", [mediumId]);
    for (const other of others) await timed("unlink", "relations", "unlink", [other.relationId]);
    await timed("delete medium", "entities", "delete", [mediumId]);
  } else if (task === "move" || task === "append") {
    const tracks: { entityId: string; payload: { role: string } }[] = await timed(
      "tracks",
      "entities",
      "list",
      [{ entityKind: "track" }],
    );
    const overlay = tracks.find((track) => track.payload.role === "overlay");
    if (overlay === undefined) throw new Error("no overlay track");
    if (task === "move") {
      const [last]: { relationId: string }[] = await timed("of last", "relations", "of", [
        overlay.entityId,
        "contain",
        { last: 1 },
      ]);
      await timed("move", "relations", "move", [last?.relationId, { index: 0 }]);
    } else {
      const create = (entityKind: string, payload?: unknown) =>
        timed(`create ${entityKind}`, "entities", "create", [
          { entityKind, ...(payload === undefined ? {} : { payload }) },
        ]);
      const logo: { entityId: string } = await create("image", {
        system: "files",
        key: "logo.png",
        name: "Logo",
      });
      const clip: { entityId: string } = await create("clip");
      const marker: { entityId: string } = await create("sequence-marker", { startMs: 0, durationMs: 3000 });
      const link = (relationKind: string, from: string, to: string) =>
        timed(`link ${relationKind}`, "relations", "link", [
          { relationKind, endpoint0EntityId: from, endpoint1EntityId: to },
        ]);
      await link("marker", clip.entityId, marker.entityId);
      await link("contain", clip.entityId, logo.entityId);
      await link("contain", overlay.entityId, clip.entityId);
    }
  }
  if (task === "caption") await captionEveryOverlayClip(timed);
  if (task === "deleteOverlay") {
    const { held } = await overlayWalk(timed);
    for (const relation of held) await timed("delete", "entities", "delete", [relation.endpoint1EntityId]);
  }
  for (const [label, [calls, ms, cpuMs, requests, rows]] of totals)
    console.log(
      `${label}: ${calls} calls, ${ms!.toFixed(0)} ms (CPU ${cpuMs!.toFixed(0)} ms), ${requests} requests, ${rows} rows`,
    );
  const callsMs = performance.now() - started;
  const finishStart = performance.now();
  const plan = await session.finish({ ok: true, value: undefined } as never);
  console.log(
    `${task} at ${count}: calls ${callsMs.toFixed(0)} ms, finish ${(performance.now() - finishStart).toFixed(0)} ms, writes ${plan.preview.writes}; ${memory()}, update ${mib(plan.update.byteLength)} MiB`,
  );
  if (commit) {
    const pushStart = performance.now();
    const cpu = process.cpuUsage();
    const pushed = await host.push("bench", plan.update);
    const used = process.cpuUsage(cpu);
    if (pushed.status !== "committed") throw new Error(`commit: ${JSON.stringify(pushed).slice(0, 300)}`);
    console.log(
      `commit: ${(performance.now() - pushStart).toFixed(0)} ms (CPU ${((used.user + used.system) / 1000).toFixed(0)} ms)`,
    );
  }
} finally {
  await host.close();
  await store.close();
  rmSync(directory, { recursive: true, force: true });
}

type Timed = (label: string, binding: string, method: string, args: unknown[]) => Promise<never>;

/** The tracks, then the overlay track's clips: how both walking tasks begin. */
async function overlayWalk(timed: Timed) {
  const tracks: { entityId: string; payload: { role: string } }[] = await timed(
    "tracks",
    "entities",
    "list",
    [{ entityKind: "track" }],
  );
  const overlay = tracks.find((track) => track.payload.role === "overlay")!;
  const held: { endpoint1EntityId: string }[] = await timed("of contain", "relations", "of", [
    overlay.entityId,
    "contain",
  ]);
  return { tracks, held };
}

/** The calls of task-list.ts's "caption every overlay clip at its start". */
async function captionEveryOverlayClip(timed: Timed) {
  const { tracks, held } = await overlayWalk(timed);
  const captions = tracks.find((track) => track.payload.role === "caption")!;
  for (const [index, relation] of held.entries()) {
    const [markerOf]: { endpoint1EntityId: string }[] = await timed("of marker", "relations", "of", [
      relation.endpoint1EntityId,
      "marker",
    ]);
    const marker: { payload: { startMs: number } } = await timed("get", "entities", "get", [
      markerOf!.endpoint1EntityId,
    ]);
    const create = (entityKind: string, payload?: unknown): Promise<{ entityId: string }> =>
      timed(`create ${entityKind}`, "entities", "create", [
        { entityKind, ...(payload === undefined ? {} : { payload }) },
      ]);
    const caption = await create("caption", { text: `Overlay ${index + 1}` });
    const clip = await create("clip");
    const at = await create("sequence-marker", { startMs: marker.payload.startMs, durationMs: 1500 });
    const link = (relationKind: string, from: string, to: string) =>
      timed(`link ${relationKind}`, "relations", "link", [
        { relationKind, endpoint0EntityId: from, endpoint1EntityId: to },
      ]);
    await link("marker", clip.entityId, at.entityId);
    await link("contain", clip.entityId, caption.entityId);
    await link("contain", captions.entityId, clip.entityId);
  }
}
