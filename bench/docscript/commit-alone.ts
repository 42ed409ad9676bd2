/**
 * The commit side of `tasks.ts` alone, for profiling (`--cpu-prof`): a `DocumentHost` over a copy of
 * the seeded SQLite file (the tasks' timeline) in this process, and pushes made as a committed plan
 * makes them (its changes carry `{"planId": …}`), written straight to a replica of the document:
 *
 * - the first commit after the server opened the document (one marker retimed), and a second one;
 * - the shift: every marker from 30 s moved by 2 s (~a third of all entities), one plan.
 *
 * Each is timed by wall clock and by this process's CPU time; beside the shift, the same writes made
 * straight to Loro (the replica's maps, one commit, the update exported) as a ratio in the same run.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/docscript/commit-alone.ts [entities] [--no-shift]   # 100000
 */
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LoroDoc, LoroMap } from "loro-crdt";
import { createSqliteDocumentStore, DocumentHost } from "../../packages/docscript/src/server/index.ts";
import { timelineSchema } from "../../packages/docscript/src/timeline/timeline-schema.ts";
import { seedFile } from "./scale-harness.ts";

const args = process.argv.slice(2);
const count = Number(args.find((arg) => !arg.startsWith("--")) ?? 100_000);
const shift = !args.includes("--no-shift");
const { path: seeded } = seedFile(count, 10);
const directory = mkdtempSync(join(tmpdir(), "docscript-commit-alone-"));
const path = join(directory, "doc.sqlite");
copyFileSync(seeded, path);
const host = new DocumentHost({ store: createSqliteDocumentStore({ path }), schema: timelineSchema });

/** Markers' fields maps (in their clips' slots), by the clip row holding them. */
function markers(doc: LoroDoc): [string, LoroMap][] {
  const found: [string, LoroMap][] = [];
  const entities = doc.getMap("entities");
  for (const rowId of entities.keys()) {
    const marker = ((entities.get(rowId) as LoroMap).get("slots") as LoroMap | undefined)?.get("marker");
    if (marker instanceof LoroMap) found.push([rowId, marker.get("fields") as LoroMap]);
  }
  return found;
}

let plans = 0;
/** Writes `edit` into the replica as one plan's change and pushes it; wall and CPU ms. */
async function commit(replica: LoroDoc, label: string, edit: (doc: LoroDoc) => void) {
  const before = replica.oplogVersion();
  edit(replica);
  replica.commit({ message: JSON.stringify({ planId: `bench-plan-${plans++}` }) });
  const update = replica.export({ mode: "update", from: before });
  const started = performance.now();
  const cpu = process.cpuUsage();
  const result = await host.push("bench", update);
  const used = process.cpuUsage(cpu);
  const ms = performance.now() - started;
  const cpuMs = (used.user + used.system) / 1000;
  if (result.status !== "committed") throw new Error(`${label}: ${JSON.stringify(result).slice(0, 400)}`);
  console.log(`${label}: ${ms.toFixed(0)} ms (CPU ${cpuMs.toFixed(0)} ms), update ${update.length} bytes`);
  return { ms, cpuMs };
}

try {
  const { bytes } = await host.snapshot("bench");
  const replica = LoroDoc.fromSnapshot(bytes);
  replica.setPeerId(77);
  const all = markers(replica);
  const retime = (at: number) => (doc: LoroDoc) => {
    void doc;
    all[0]?.[1].set("startMs", at);
  };
  const first = await commit(replica, "first commit after open (one marker)", retime(1_500));
  const second = await commit(replica, "second commit (one marker)", retime(1_600));
  console.log(`first / second: ${(first.ms / second.ms).toFixed(1)}× wall, ${first.ms - second.ms} ms apart`);
  if (shift) {
    const moved = all.filter(([, fields]) => (fields.get("startMs") as number) >= 30_000);
    // The same writes straight to Loro, on a replica of the same version (the ratio's baseline).
    const loro = LoroDoc.fromSnapshot(replica.export({ mode: "snapshot" }));
    const loroMarkers = new Map(markers(loro));
    const loroStart = performance.now();
    const loroCpu = process.cpuUsage();
    const loroBefore = loro.oplogVersion();
    for (const [rowId] of moved) {
      const fields = loroMarkers.get(rowId)!;
      fields.set("startMs", (fields.get("startMs") as number) + 2000);
    }
    loro.commit();
    loro.export({ mode: "update", from: loroBefore });
    const loroUsed = process.cpuUsage(loroCpu);
    const loroMs = performance.now() - loroStart;
    const loroCpuMs = (loroUsed.user + loroUsed.system) / 1000;
    console.log(
      `straight to Loro (${moved.length} markers): ${loroMs.toFixed(0)} ms (CPU ${loroCpuMs.toFixed(0)} ms)`,
    );
    const shifted = await commit(replica, `shift (${moved.length} markers)`, () => {
      for (const [, fields] of moved) fields.set("startMs", (fields.get("startMs") as number) + 2000);
    });
    console.log(
      `shift commit / straight to Loro: ${(shifted.cpuMs / loroCpuMs).toFixed(1)}× CPU, ${(shifted.ms / loroMs).toFixed(1)}× wall`,
    );
    await commit(replica, "a commit after the shift (one marker)", retime(1_700));
  }
} finally {
  await host.close();
  rmSync(directory, { recursive: true, force: true });
}
