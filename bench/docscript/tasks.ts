/**
 * Tasks bench: an editor's tasks at 1k, 10k and 100k entities, each run as the edit script a model
 * would write (`run-edit-script`, default 30 s limit) and committed (`commit-plan`), through a real
 * document server over SQLite in a child process of its own (`scale-server.ts`), as `scale.ts` does.
 * Beside each, the baseline: the same edits written straight to Loro (a replica of the seeded
 * document, the rows' maps written by key, one commit, the update exported), in a thread of its own
 * (`task-baseline.ts`). The tasks themselves are in `task-list.ts`.
 *
 * The document: the sample timeline plus image clips (image, clip with its marker, `contain`), every
 * tenth clip on an overlay track (`largeTimeline(n, 10)`), seeded once per size under the OS temp dir.
 * The tasks run in order on one document, each committed before the next.
 *
 * Beside the times, the CPU the two processes spent over each task's run and commit (every thread:
 * the tool's host and sandbox workers, the garbage collector's helpers, the server): on a machine
 * others share, times move with its load, CPU much less, so a change is told by its CPU. And what each
 * commit's answer leaves to do (the tool's replica taking the plan, a replaced host worker's successor,
 * the server's next push readied): the wait until both processes are quiet, and the CPU spent in it.
 *
 * With `--store=postgres` the server keeps the document in PostgreSQL (TACKLE_TEST_PG's server): a
 * database seeded once per size (`postgres-seed.ts`), each run on a copy of it.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/docscript/tasks.ts [--only=N,...] [--store=postgres] [entityCounts...]   # 1k 10k 100k
 */
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDocScriptTool } from "../../packages/docscript/src/index.ts";
import { createSqliteDocumentStore } from "../../packages/docscript/src/server/index.ts";
import { copyOf, seededDatabase } from "./postgres-seed.ts";
import { seedFile, startServer } from "./scale-harness.ts";
import { startBaseline } from "./task-baseline.ts";
import { overlayEvery, tasks } from "./task-list.ts";

const args = process.argv.slice(2);
/** `--only=N,M`: run only these tasks (0-based, in the table's order; for profiling one at a time). */
const only = args
  .find((arg) => arg.startsWith("--only="))
  ?.slice("--only=".length)
  .split(",")
  .map(Number);
/** `--store=postgres`: the server's store is PostgreSQL; SQLite otherwise. */
const onPostgres = args.includes("--store=postgres");
const requested = args
  .filter((arg) => !arg.startsWith("--"))
  .map(Number)
  .filter((count) => count > 0);
const entityCounts = requested.length > 0 ? requested : [1_000, 10_000, 100_000];
const token = "bench-document-token-0123456789";
function ok(result: unknown, op: string): Record<string, unknown> {
  const value = result as { ok: boolean; error?: { code: string; message: string } };
  if (!value.ok) throw new Error(`${op}: ${value.error?.code}: ${value.error?.message}`);
  return value as unknown as Record<string, unknown>;
}

const format = (ms: number) => (ms >= 100 ? ms.toFixed(0) : ms.toFixed(1));

interface Row {
  readonly task: string;
  readonly cells: Map<number, string>;
  /** CPU seconds: tool process + server process, over the run and the commit. */
  readonly cpu: Map<number, string>;
  /** After the commit's answer until both processes were quiet: ms waited, and the CPU spent. */
  readonly after: Map<number, string>;
}
const table: Row[] = tasks.map((task) => ({
  task: task.name,
  cells: new Map(),
  cpu: new Map(),
  after: new Map(),
}));

/** CPU seconds of the tool's process and the server's since `from` (µs readings). */
async function cpuSince(
  server: { ask<T>(message: unknown): Promise<T> },
  from?: { tool: number; server: number },
) {
  const toolUsage = process.cpuUsage();
  const serverUsage = await server.ask<{ user: number; system: number }>({ op: "cpu" });
  const now = { tool: toolUsage.user + toolUsage.system, server: serverUsage.user + serverUsage.system };
  return from === undefined ? now : spent(from, now);
}

/** CPU seconds between two µs readings of `cpuSince`. */
function spent(from: { tool: number; server: number }, to: { tool: number; server: number }) {
  return { tool: (to.tool - from.tool) / 1e6, server: (to.server - from.server) / 1e6 };
}
/**
 * Waits until the tool's process (the baseline's thread included) and the server's have both been idle
 * for one window (under 10% of a core each), at most `deadlineMs`: each task, and each baseline, starts
 * on a quiet machine, as an agent's next call comes after its model's turn. What either process leaves
 * running after an answer (the baseline's thread freeing the map handles it read, the tool's next
 * replica made ready, the server's next push readied) would otherwise be charged to whatever runs next.
 * Returns the ms waited, or undefined when the deadline passed first.
 */
async function settle(
  server: { ask<T>(message: unknown): Promise<T> },
  deadlineMs = 15_000,
): Promise<number | undefined> {
  const windowMs = 100;
  const start = performance.now();
  let last = await cpuSince(server);
  while (performance.now() - start < deadlineMs) {
    await new Promise((resolve) => setTimeout(resolve, windowMs));
    const spent = await cpuSince(server, last);
    last = await cpuSince(server);
    if (spent.tool * 1000 < windowMs / 10 && spent.server * 1000 < windowMs / 10)
      return performance.now() - start;
  }
  return undefined;
}

const directory = mkdtempSync(join(tmpdir(), "docscript-tasks-"));
try {
  for (const count of entityCounts) {
    const { path: seeded, seed } = seedFile(count, overlayEvery);
    process.stderr.write(`${count}: ${seed.entityCount} entities\n`);
    const path = join(directory, `tasks-${count}.sqlite`);
    let copy: { url: string; drop(): Promise<void> } | undefined;
    if (onPostgres)
      copy = await copyOf(await seededDatabase(count, overlayEvery), `tackle_bench_tasks_${count}`);
    else copyFileSync(seeded, path);
    // The baseline's replica: the seeded snapshot, straight into Loro, in the baseline's thread.
    const store = createSqliteDocumentStore({ path: seeded });
    const stored = await store.load("bench");
    await store.close();
    if (stored === undefined) throw new Error("the seeded file has no document");
    const baseline = await startBaseline(stored.snapshot);

    const server = await startServer([copy?.url ?? path]);
    const tool = createDocScriptTool({
      httpOrigin: server.url,
      authToken: token,
      documents: ["bench"],
      requestTimeoutMs: 600_000,
    });
    try {
      ok(await tool.handle({ op: "snapshot", doc_id: "bench" }), "snapshot");
      // The first run in a process reads the document once (`scale.ts` measures it): not a task's cost.
      const warmStart = performance.now();
      ok(
        await tool.handle({ op: "run-edit-script", doc_id: "bench", script: "entities.get('track-1');" }),
        "first run",
      );
      process.stderr.write(`${count}: first run ${format(performance.now() - warmStart)} ms\n`);
      for (const [index, task] of tasks.entries()) {
        if (only !== undefined && !only.includes(index)) continue;
        let cell: string;
        try {
          if ((await settle(server)) === undefined) process.stderr.write(`${count}: not quiet after 15 s\n`);
          const cpuStart = await cpuSince(server);
          const runStart = performance.now();
          const run = ok(
            await tool.handle({ op: "run-edit-script", doc_id: "bench", script: task.script }),
            "run",
          );
          const runMs = performance.now() - runStart;
          const commitStart = performance.now();
          const commit = ok(
            await tool.handle({ op: "commit-plan", doc_id: "bench", plan_id: run.plan_id as string }),
            "commit",
          );
          const commitMs = performance.now() - commitStart;
          const answered = await cpuSince(server);
          const cpu = spent(cpuStart, answered);
          table[index]?.cpu.set(count, `${cpu.tool.toFixed(2)} + ${cpu.server.toFixed(2)}`);
          if (commit.status !== "committed") throw new Error(`commit ended ${String(commit.status)}`);
          const writes = (run.preview as { writes: number }).writes;
          // What the answer left to do (the tool's replica taking the plan, a replaced host worker's
          // successor reading the document, the server's next push readied), until both are quiet.
          const quietMs = await settle(server);
          if (quietMs === undefined) process.stderr.write(`${count}: not quiet after 15 s\n`);
          const after = await cpuSince(server, answered);
          table[index]?.after.set(
            count,
            `${quietMs === undefined ? "> 15 s" : format(quietMs)}: ${after.tool.toFixed(2)} + ${after.server.toFixed(2)}`,
          );
          const loroMs = await baseline.run(index);
          cell = `${format(runMs)} + ${format(commitMs)} | ${writes} | ${format(loroMs)}`;
        } catch (error) {
          cell = `fails: ${(error as Error).message.slice(0, 120)} | — | —`;
        }
        process.stderr.write(
          `${count}: ${task.name}: ${cell} | cpu s ${table[index]?.cpu.get(count) ?? "—"} | then until quiet ms: cpu s ${table[index]?.after.get(count) ?? "—"}\n`,
        );
        table[index]?.cells.set(count, cell);
      }
    } finally {
      await tool.close();
      await server.close();
      await baseline.close();
      await copy?.drop();
    }
  }
} finally {
  rmSync(directory, { recursive: true, force: true });
}
console.log(
  `Node ${process.version}, ${new Date().toISOString()}, ${onPostgres ? "PostgreSQL" : "SQLite"}; ms: run + commit | writes | straight to Loro`,
);
const header = entityCounts.map(
  (count) => `${count.toLocaleString("en")}: run + commit ms | writes | Loro ms`,
);
console.log(`| task | ${header.join(" | ")} |`);
console.log(`| --- | ${entityCounts.map(() => "---: | ---: | ---:").join(" | ")} |`);
for (const row of table)
  console.log(
    `| ${row.task} | ${entityCounts.map((count) => row.cells.get(count) ?? "— | — | —").join(" | ")} |`,
  );
console.log("\nCPU seconds over each task's run and commit: tool process + server process (every thread)");
console.log(`| task | ${entityCounts.map((count) => count.toLocaleString("en")).join(" | ")} |`);
console.log(`| --- | ${entityCounts.map(() => "---:").join(" | ")} |`);
for (const row of table)
  console.log(`| ${row.task} | ${entityCounts.map((count) => row.cpu.get(count) ?? "—").join(" | ")} |`);
console.log(
  "\nAfter each commit's answer, until both processes were quiet (at least 100 ms under a tenth of a core each): ms waited: CPU seconds, tool + server",
);
console.log(`| task | ${entityCounts.map((count) => count.toLocaleString("en")).join(" | ")} |`);
console.log(`| --- | ${entityCounts.map(() => "---:").join(" | ")} |`);
for (const row of table)
  console.log(`| ${row.task} | ${entityCounts.map((count) => row.after.get(count) ?? "—").join(" | ")} |`);
