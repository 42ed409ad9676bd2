/**
 * What a caller's legal calls cost the host: each flood twice in one run, against the service as
 * shipped (its default bounds) and against the same service with that bound lifted (the option set to
 * Infinity: the plain, unbounded baseline), each in a fresh child process over real HTTP on loopback
 * and a SQLite file in a temporary directory removed at the end. Printed: the flood, its workload, the
 * calls accepted and refused (by status and code), the serving process's peak RSS above its RSS before
 * the flood, the bytes left stored, the wall time and the event-loop delay (p99 and max).
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/floods/floods.ts [--scale=1] [--only=durable-state,core-base64]
 *
 * `--scale=N` multiplies each flood's counts (and the core answer's length); the sizes the ADRs measured
 * are reached at `--scale=2` for the durable starts (24) and about 5.3 for its streams (32; the long
 * thread is the ADR's 60 runs at every scale), 2.5 for the docscript readers (200) and pushes (60), and
 * 4 for the core answer (4,000,000 characters). Scale 1 runs in about three minutes on 2 cores.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { floods } from "./flood-child.ts";
import { type FloodRow, mib, type Variant } from "./measure.ts";

const option = (name: string) =>
  process.argv.find((argument) => argument.startsWith(`--${name}=`))?.slice(name.length + 3);
const scale = Number(option("scale") ?? 1);
const only = option("only")?.split(",") ?? Object.keys(floods);
for (const name of only) if (floods[name] === undefined) throw new Error(`no flood "${name}"`);
if (!(scale > 0)) throw new Error("--scale is a positive number");

const childPath = join(import.meta.dirname, "flood-child.ts");
/** A child past this is killed and its row reported as timed out. */
const childDeadlineMs = 300_000;

/** Runs one flood in a child process of its own; its row, or why there is none. */
function runChild(name: string, variant: Variant, directory: string): Promise<FloodRow | string> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ["--expose-gc", "--conditions=@tackle/source", childPath, name, variant, String(scale), directory],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), childDeadlineMs);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const line = stdout.split("\n").find((text) => text.startsWith("RESULT "));
      if (line !== undefined) resolve(JSON.parse(line.slice("RESULT ".length)) as FloodRow);
      else resolve(`exited ${code ?? signal}: ${stderr.trim().split("\n").slice(-3).join(" / ")}`);
    });
  });
}

const seconds = (ms: number) => (ms / 1000).toFixed(ms < 10_000 ? 2 : 1);
const delay = (ms: number) => (ms < 10 ? ms.toFixed(1) : ms.toFixed(0));
const refusals = (refused: Record<string, number>) =>
  Object.entries(refused)
    .map(([code, count]) => `${count} × ${code}`)
    .join(", ") || "none";

function tableRow(row: FloodRow): string {
  return `| ${row.flood} | ${row.workload} | ${row.service} | ${row.accepted} | ${refusals(row.refused)} | ${mib(row.peakRssBytes)} | ${row.storedBytes === undefined ? "–" : mib(row.storedBytes)} | ${seconds(row.wallMs)} | ${delay(row.loopDelayP99Ms)} / ${delay(row.loopDelayMaxMs)} | ${row.notes} |`;
}

const root = mkdtempSync(join(tmpdir(), "tackle-floods-"));
const startedAt = new Date();
const loadBefore = loadavg();
const started = performance.now();
const lines: string[] = [];
try {
  console.log(
    `floods at scale ${scale}: ${startedAt.toISOString()}, Node ${process.version}, ${cpus().length} cores, load ${loadBefore.map((value) => value.toFixed(2)).join(" ")}`,
  );
  for (const name of only) {
    for (const variant of ["bounded", "unbounded"] as const) {
      const directory = mkdtempSync(join(root, `${name}-${variant}-`));
      const row = await runChild(name, variant, directory);
      rmSync(directory, { recursive: true, force: true });
      const line =
        typeof row === "string" ? `| ${name} | | ${variant} | ${row} | | | | | | |` : tableRow(row);
      lines.push(line);
      console.log(`  ${name} ${variant}: done at ${seconds(performance.now() - started)} s`);
    }
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}
console.log(
  "\n| flood | workload | service | accepted | refused | peak RSS Δ MiB | stored MiB | wall s | loop delay p99 / max ms | notes |",
);
console.log("| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | --- |");
for (const line of lines) console.log(line);
console.log(
  `\nwhole run ${seconds(performance.now() - started)} s; load ${loadBefore.map((value) => value.toFixed(2)).join(" ")} before, ${loadavg()
    .map((value) => value.toFixed(2))
    .join(" ")} after`,
);
