/**
 * Scale bench: what a model's calls cost as a timeline document grows (1k, 10k, 100k, 1M entities).
 * Per size, through a real document server on loopback (SQLite in a temp dir) and the edit-script tool:
 *
 * - open: a server started over the stored file answers its first call on the document (a fresh tool's
 *   first `snapshot`), the cost a model pays after a restart or an eviction;
 * - snapshot page: a later `snapshot` call (p50);
 * - warm run: a ten-write `run-edit-script` on a warm worker at an unchanged version (p50);
 * - commit: `commit-plan` of such a run (p50);
 * - push check: the server checking one clip-volume change from another peer (`host.push`, p50).
 *
 * A step that fails or runs past its time box is reported as such, never left out.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/docscript/scale.ts [entityCounts...]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LoroDoc, type LoroMap } from "loro-crdt";
import { checkDocument } from "../../packages/docscript/src/document/check-document.ts";
import { projectDocument } from "../../packages/docscript/src/document/interpret.ts";
import { createDocScriptTool } from "../../packages/docscript/src/index.ts";
import {
  createSqliteDocumentStore,
  hashToken,
  serveDocuments,
} from "../../packages/docscript/src/server/index.ts";
import { allRowChanges } from "../../packages/docscript/src/server/row-members.ts";
import { timelineSchema } from "../../packages/docscript/src/timeline/timeline-schema.ts";
import { largeTimeline } from "../../packages/docscript/test/large-timeline.ts";

const requested = process.argv
  .slice(2)
  .map(Number)
  .filter((count) => count > 0);
const entityCounts = requested.length > 0 ? requested : [1_000, 10_000, 100_000, 1_000_000];
const token = "bench-document-token-0123456789";

/** Ten writes: ten clips on the video track get a new volume, found by id (no whole-document scan). */
const tenWrites = (clipIds: readonly string[], volume: number) =>
  `for (const id of ${JSON.stringify(clipIds)}) entities.update(id, [{ op: 'set', path: ['volume'], value: ${volume} }]);`;

function percentile(samples: number[], fraction: number): number {
  const sorted = [...samples].sort((left, right) => left - right);
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)] ?? Number.NaN;
}

const format = (value: number): string =>
  Number.isNaN(value) ? "—" : value >= 100 ? value.toFixed(0) : value.toFixed(1);

/** p50 of `runs` timed calls, or why it could not be measured. */
async function measure(runs: number, budgetMs: number, body: (index: number) => Promise<void>) {
  const samples: number[] = [];
  const started = performance.now();
  try {
    for (let index = 0; index < runs; index++) {
      const start = performance.now();
      await body(index);
      samples.push(performance.now() - start);
      if (performance.now() - started > budgetMs) break;
    }
  } catch (error) {
    return `fails: ${(error as Error).message.slice(0, 80)}`;
  }
  return `${format(percentile(samples, 0.5))} (${samples.length})`;
}

function ok(result: unknown, op: string): Record<string, unknown> {
  const value = result as { ok: boolean; error?: { code: string; message: string } };
  if (!value.ok) throw new Error(`${op}: ${value.error?.code}: ${value.error?.message}`);
  return value as unknown as Record<string, unknown>;
}

const rows: string[] = [];
const commitMs: number[] = [];
const directory = mkdtempSync(join(tmpdir(), "docscript-scale-"));
try {
  for (const count of entityCounts) {
    const extraClips = Math.max(0, Math.round((count - 12) / 3));
    const builtAt = performance.now();
    const { snapshot, firstClips: videoClips } = largeTimeline(extraClips);
    process.stderr.write(
      `${count}: built in ${Math.round(performance.now() - builtAt)} ms, ${(snapshot.byteLength / 1048576).toFixed(1)} MiB\n`,
    );
    const path = join(directory, `scale-${count}.sqlite`);
    // Stored as a server creates a document: the snapshot with its rows (read once here, untimed).
    const seed = createSqliteDocumentStore({ path });
    const projection = projectDocument(LoroDoc.fromSnapshot(snapshot), timelineSchema);
    await seed.createDocument({
      documentId: "bench",
      tokenHash: hashToken(token),
      snapshot,
      rows: allRowChanges(projection),
      issues: checkDocument(projection),
    });
    await seed.close();
    process.stderr.write(`${count}: stored with its rows in ${Math.round(performance.now() - builtAt)} ms\n`);

    const server = await serveDocuments({
      store: createSqliteDocumentStore({ path }),
      schema: timelineSchema,
    });
    const tool = createDocScriptTool({
      httpOrigin: server.url,
      authToken: token,
      sandbox: { workers: 1, maxRunsPerWorker: 1000, timeoutMs: 300_000, prepareTimeoutMs: 600_000 },
    });
    try {
      const open = await measure(1, 0, async () => {
        ok(await tool.handle({ op: "snapshot", doc_id: "bench" }), "snapshot");
      });
      process.stderr.write(`${count}: open ${open}\n`);
      const page = await measure(10, 20_000, async () => {
        ok(await tool.handle({ op: "snapshot", doc_id: "bench" }), "snapshot");
      });
      process.stderr.write(`${count}: page ${page}\n`);
      let planId = "";
      const warmup = await measure(1, 0, async () => {
        planId = ok(
          await tool.handle({ op: "run-edit-script", doc_id: "bench", script: tenWrites(videoClips, -1) }),
          "run",
        ).plan_id as string;
      });
      process.stderr.write(`${count}: first run ${warmup}\n`);
      const warm = warmup.startsWith("fails")
        ? warmup
        : await measure(10, 60_000, async (index) => {
            planId = ok(
              await tool.handle({
                op: "run-edit-script",
                doc_id: "bench",
                script: tenWrites(videoClips, -2 - (index % 40)),
              }),
              "run",
            ).plan_id as string;
          });
      process.stderr.write(`${count}: warm run ${warm}\n`);
      const commit = warm.startsWith("fails")
        ? "—"
        : await measure(5, 60_000, async (index) => {
            if (index > 0) {
              planId = ok(
                await tool.handle({
                  op: "run-edit-script",
                  doc_id: "bench",
                  script: tenWrites(videoClips, -3 - index),
                }),
                "run",
              ).plan_id as string;
            }
            const started = performance.now();
            const result = ok(
              await tool.handle({ op: "commit-plan", doc_id: "bench", plan_id: planId }),
              "commit",
            );
            if (result.status !== "committed") throw new Error(`commit ended ${String(result.status)}`);
            // Only the commit is timed: the run before it is setup.
            commitMs.push(performance.now() - started);
          });
      const commitFigure =
        commit.startsWith("fails") || commit === "—"
          ? commit
          : `${format(percentile(commitMs.splice(0), 0.5))} (${commit.split("(")[1]}`;
      process.stderr.write(`${count}: commit ${commitFigure}\n`);
      // Push check: another peer's one-field change, checked by the server's host.
      const other = LoroDoc.fromSnapshot(snapshot);
      other.setPeerId(9);
      const push = await measure(20, 60_000, async (index) => {
        const clipId = videoClips[index % videoClips.length]!;
        const before = other.oplogVersion();
        ((other.getMap("entities").get(clipId) as LoroMap).get("fields") as LoroMap).set(
          "speed",
          1 + (index % 9) / 10,
        );
        other.commit();
        const update = other.export({ mode: "update", from: before });
        const result = await server.host.push("bench", update);
        if (result.status !== "committed") throw new Error(`push ended ${result.status}`);
      });
      process.stderr.write(`${count}: push ${push}\n`);
      rows.push(
        `| ${count.toLocaleString("en")} | ${open} | ${page} | ${warm} | ${commitFigure} | ${push} |`,
      );
    } finally {
      await tool.close();
      await server.close();
    }
  }
} finally {
  rmSync(directory, { recursive: true, force: true });
}
console.log(`Node ${process.version}, ${new Date().toISOString()}; p50 ms (samples)`);
console.log(
  "| entities | open (first snapshot call after a start) | snapshot page | warm ten-write run | commit-plan | push check |",
);
console.log("| -------: | ---: | ---: | ---: | ---: | ---: |");
for (const row of rows) console.log(row);
