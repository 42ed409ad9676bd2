/**
 * Scale bench: what a model's calls cost as a timeline document grows (1k, 10k, 100k, 1M entities).
 * Per size, through a real document server (SQLite in a temp dir) in a child process of its own
 * (`scale-server.ts`, as in any deployment), reached over loopback HTTP by the edit-script tool in this
 * process:
 *
 * - open: a server started over the stored file answers its first call on the document (a fresh tool's
 *   first `snapshot`), the cost a model pays after a restart or an eviction; with the peak growth of
 *   this process's (the tool's) heap and RSS meanwhile;
 * - snapshot page: a later `snapshot` call (p50);
 * - `related_to` page: a `snapshot` of what a clip is related to, looked up from the stored rows (p50);
 * - first push: the server checking another peer's one-clip change right after the open (the peer in a
 *   process of its own, pushing over loopback HTTP);
 * - first run: the first ten-write `run-edit-script` on the document in this process, with the peak
 *   growth of this process's heap and RSS meanwhile;
 * - warm run: a ten-write `run-edit-script` on a warm worker at an unchanged version (p50);
 * - commit: `commit-plan` of such a run (p50);
 * - push check: more such pushes (p50).
 *
 * The seeded file is built once per size by `scale-seed.ts` (a child process) and kept under the OS
 * temp dir; each run works on a copy. A step that fails or runs past its time box is reported as such,
 * never left out.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/docscript/scale.ts [--runs-up-to=N] [entityCounts...]
 */
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getHeapStatistics } from "node:v8";
import { createDocScriptTool } from "../../packages/docscript/src/index.ts";
import { seedFile, startServer } from "./scale-harness.ts";

const requested = process.argv
  .slice(2)
  .map(Number)
  .filter((count) => count > 0);
/** `--runs-up-to=N`: the run-edit-script steps (warm run, commit) only at sizes up to N. */
const runsUpTo = Number(
  process.argv.find((arg) => arg.startsWith("--runs-up-to="))?.split("=")[1] ?? Number.POSITIVE_INFINITY,
);
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
async function measure(
  runs: number,
  budgetMs: number,
  body: (index: number) => Promise<unknown>,
  /** The body answers its own time (a step timed in the server's process). */
  timedByBody = false,
) {
  const samples: number[] = [];
  const started = performance.now();
  try {
    for (let index = 0; index < runs; index++) {
      const start = performance.now();
      const own = await body(index);
      samples.push(timedByBody ? (own as number) : performance.now() - start);
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

const mib = (bytes: number) => Math.round(bytes / 1048576);

/** Peak heap used and RSS while `work` runs (sampled every 20 ms, and at its end). */
async function peakMemory<T>(work: () => Promise<T>): Promise<{ value: T; heapMiB: number; rssMiB: number }> {
  let heap = 0;
  let rss = 0;
  const sample = () => {
    const usage = process.memoryUsage();
    heap = Math.max(heap, usage.heapUsed);
    rss = Math.max(rss, usage.rss);
  };
  const timer = setInterval(sample, 20);
  try {
    const value = await work();
    sample();
    return { value, heapMiB: mib(heap), rssMiB: mib(rss) };
  } finally {
    clearInterval(timer);
  }
}

const rows: string[] = [];
const commitMs: number[] = [];
const directory = mkdtempSync(join(tmpdir(), "docscript-scale-"));
try {
  for (const count of entityCounts) {
    const { path: seeded, seed } = seedFile(count);
    const videoClips = seed.firstClips;
    process.stderr.write(`${count}: ${seed.entityCount} entities, snapshot ${mib(seed.snapshotBytes)} MiB\n`);
    // Each run works on a copy: its pushes change the file.
    const path = join(directory, `scale-${count}.sqlite`);
    copyFileSync(seeded, path);
    // What this process holds before the server opens anything (earlier sizes' leftovers collected).
    (globalThis as { gc?: () => void }).gc?.();
    const baseline = process.memoryUsage();

    const server = await startServer([path]);
    // Another peer, in a process of its own, pushing one-clip changes to the server over HTTP.
    const peer = await startServer(["--peer", server.url, seeded]);
    const tool = createDocScriptTool({
      httpOrigin: server.url,
      authToken: token,
      documents: ["bench"],
      requestTimeoutMs: 600_000,
      sandbox: { workers: 1, maxRunsPerWorker: 1000, timeoutMs: 600_000, prepareTimeoutMs: 600_000 },
    });
    try {
      const opened = await peakMemory(() =>
        measure(1, 0, async () => {
          ok(await tool.handle({ op: "snapshot", doc_id: "bench" }), "snapshot");
        }),
      );
      const open = opened.value;
      const memory = `${opened.heapMiB - mib(baseline.heapUsed)} / ${opened.rssMiB - mib(baseline.rss)}`;
      process.stderr.write(`${count}: open ${open}, heap / RSS growth ${memory} MiB\n`);
      const page = await measure(10, 20_000, async () => {
        ok(await tool.handle({ op: "snapshot", doc_id: "bench" }), "snapshot");
      });
      process.stderr.write(`${count}: page ${page}\n`);
      // A filtered page (ADR 0467): what a clip is related to, looked up from the stored rows.
      const relatedPage = await measure(10, 20_000, async () => {
        ok(
          await tool.handle({ op: "snapshot", doc_id: "bench", related_to: videoClips[0] ?? "" }),
          "related_to snapshot",
        );
      });
      process.stderr.write(`${count}: related_to page ${relatedPage}\n`);
      // Another peer's one-field change to a clip, as the server checks it (`host.push`, in its process).
      let pushes = 0;
      const pushOne = async () => {
        const clipId = videoClips[pushes % videoClips.length] ?? "";
        const result = await peer.ask<{ ms: number; status: string }>({
          op: "push",
          clipId,
          speed: 1 + (pushes % 9) / 10,
        });
        pushes += 1;
        if (result.status !== "committed") throw new Error(`push ended ${result.status}`);
        return result.ms;
      };
      // The first push after the open: it reads the rows its checks reach and makes the fork.
      const firstPush = await measure(1, 0, pushOne, true);
      process.stderr.write(`${count}: first push ${firstPush}\n`);
      let planId = "";
      let runMemory = "—";
      const warmup =
        count > runsUpTo
          ? "not run"
          : await peakMemory(() =>
              measure(1, 0, async () => {
                planId = ok(
                  await tool.handle({
                    op: "run-edit-script",
                    doc_id: "bench",
                    script: tenWrites(videoClips, -1),
                  }),
                  "run",
                ).plan_id as string;
              }),
            ).then((peak) => {
              runMemory = `${peak.heapMiB - mib(baseline.heapUsed)} / ${peak.rssMiB - mib(baseline.rss)}`;
              return peak.value;
            });
      process.stderr.write(`${count}: first run ${warmup}, heap / RSS growth ${runMemory} MiB\n`);
      const warm =
        warmup.startsWith("fails") || warmup === "not run"
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
      const commit =
        warm.startsWith("fails") || warm === "not run"
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
      // Push check: more such changes, after the first.
      const push = await measure(20, 60_000, pushOne, true);
      process.stderr.write(`${count}: push ${push}\n`);
      const serverMemory = await server.ask<{ maxRssMiB: number }>({ op: "memory" });
      rows.push(
        `| ${count.toLocaleString("en")} | ${open} | ${memory} | ${page} | ${relatedPage} | ${firstPush} | ${warmup} | ${runMemory} | ${warm} | ${commitFigure} | ${push} | ${serverMemory.maxRssMiB} |`,
      );
    } finally {
      await tool.close();
      await peer.close();
      await server.close();
    }
  }
} finally {
  rmSync(directory, { recursive: true, force: true });
}
console.log(
  `Node ${process.version}, ${new Date().toISOString()}, heap limit ${mib(getHeapStatistics().heap_size_limit)} MiB; p50 ms (samples)`,
);
console.log(
  "| entities | open (first snapshot call after a start) | open: tool's peak heap / RSS growth MiB | snapshot page | `related_to` page | first push | first run | first run: tool's peak heap / RSS growth MiB | warm ten-write run | commit-plan | push check | server's peak RSS MiB |",
);
console.log("| -------: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const row of rows) console.log(row);
