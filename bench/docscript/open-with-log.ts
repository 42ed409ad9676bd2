/**
 * Open with a log (issue 25, point 4): the first page of a document whose snapshot is followed by 100
 * small logged updates. Per size, a copy of the scale bench's seeded timeline gets 100 one-field pushes
 * from another peer through a `DocumentHost` that does not compact; then a fresh process (as a server
 * started after them) opens the store and asks for the first page of 50 entities (`host.entityPage`):
 * the store's open and the page (its rows, the issues kept with them and the version, from the stored
 * snapshot version and the 100 updates' headers: the document is not loaded, ADR 0488). Then, in
 * another fresh process each, the edit-script tool's first `snapshot` page of it: a document server
 * over the store on loopback HTTP and the tool in the same process (its tokenizer loaded first), so
 * the process's CPU time covers the server's reads and the tool's page. Each open prints its wall
 * time and its process's CPU time over the same span.
 *
 * With `--store=postgres`, the document is in PostgreSQL: a copy of the seeded database (`postgres-seed.ts`).
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/docscript/open-with-log.ts [--store=postgres] [entityCounts...]   # 100000 1000000
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { tokensOf } from "@tackle/core/tokens";
import { LoroDoc, type LoroMap } from "loro-crdt";
import { createDocScriptTool } from "../../packages/docscript/src/index.ts";
import { DocumentHost, serveDocuments } from "../../packages/docscript/src/server/index.ts";
import { timelineSchema } from "../../packages/docscript/src/timeline/timeline-schema.ts";
import { openBenchStore } from "./bench-store.ts";
import { copyOf, seededDatabase } from "./postgres-seed.ts";
import { seedFile } from "./scale-harness.ts";

const updates = 100;
const never = { compactEvery: 1_000_000, compactLogBytes: 2 ** 40, compactAgeMs: 1e12 };

const token = "bench-document-token-0123456789";

/** Wall and CPU time of `body`, from this process. */
async function timed<T>(body: () => Promise<T>): Promise<{ value: T; ms: number; cpuMs: number }> {
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  const value = await body();
  const ms = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  return { value, ms, cpuMs: (cpu.user + cpu.system) / 1000 };
}

/** Opens of `--open` or `--open-tool` in fresh processes. */
function opens(mode: string, path: string, samples: number): { ms: number; cpuMs: number }[] {
  const found: { ms: number; cpuMs: number }[] = [];
  for (let sample = 0; sample < samples; sample++) {
    const child = spawnSync(
      process.execPath,
      ["--conditions=@tackle/source", new URL(import.meta.url).pathname, mode, path],
      { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] },
    );
    if (child.status !== 0) throw new Error(`the open failed (${child.status})`);
    found.push(JSON.parse(child.stdout.trim()) as { ms: number; cpuMs: number });
  }
  return found;
}

const shown = (found: readonly { ms: number; cpuMs: number }[]) =>
  found.map(({ ms, cpuMs }) => `${Math.round(ms)} ms (CPU ${Math.round(cpuMs)})`).join(", ");

if (process.argv[2] === "--open-tool") {
  // The fresh process: a document server over the store and the tool, then the tool's first page.
  const path = process.argv[3] as string;
  tokensOf("the tokenizer, loaded before the clock starts");
  const server = await serveDocuments({
    store: await openBenchStore(path),
    schema: timelineSchema,
    ...never,
  });
  const tool = createDocScriptTool({ httpOrigin: server.url, authToken: token, documents: ["bench"] });
  const { value: page, ms, cpuMs } = await timed(() => tool.handle({ op: "snapshot", doc_id: "bench" }));
  if (!page.ok || page.op !== "snapshot" || page.entities.length === 0)
    throw new Error(`the page: ${JSON.stringify(page).slice(0, 300)}`);
  await tool.close();
  await server.close();
  console.log(JSON.stringify({ ms, cpuMs, total: page.total.entities }));
} else if (process.argv[2] === "--open") {
  // The fresh process: open the store and the document, and read the first page.
  const path = process.argv[3] as string;
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  const store = await openBenchStore(path);
  const host = new DocumentHost({ store, schema: timelineSchema, ...never });
  const page = await host.entityPage("bench", { limit: 50 });
  const ms = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  if (page.entities.length !== 50) throw new Error(`a page of ${page.entities.length}`);
  await host.close();
  await store.close();
  console.log(JSON.stringify({ ms, cpuMs, total: page.total.entities }));
} else {
  const onPostgres = process.argv.includes("--store=postgres");
  const requested = process.argv
    .slice(2)
    .filter((arg) => !arg.startsWith("--"))
    .map(Number)
    .filter((count) => count > 0);
  for (const count of requested.length > 0 ? requested : [100_000, 1_000_000]) {
    const { path: seeded, seed } = seedFile(count);
    const directory = mkdtempSync(join(tmpdir(), "docscript-open-with-log-"));
    const copy = onPostgres
      ? await copyOf(await seededDatabase(count, undefined), `tackle_bench_open_${count}`)
      : undefined;
    try {
      const path = copy?.url ?? join(directory, "doc.sqlite");
      if (copy === undefined) copyFileSync(seeded, path);
      const store = await openBenchStore(path);
      const host = new DocumentHost({ store, schema: timelineSchema, ...never });
      const { bytes } = await host.snapshot("bench");
      const peer = LoroDoc.fromSnapshot(bytes);
      peer.setPeerId(99);
      const logging = performance.now();
      for (let index = 0; index < updates; index++) {
        const before = peer.oplogVersion();
        const clip = seed.firstClips[index % seed.firstClips.length] as string;
        ((peer.getMap("entities").get(clip) as LoroMap).get("fields") as LoroMap).set(
          "volume",
          -(index % 50),
        );
        peer.commit();
        const result = await host.push("bench", peer.export({ mode: "update", from: before }));
        if (result.status !== "committed") throw new Error(`push ${index}: ${result.status}`);
      }
      const loggedMs = performance.now() - logging;
      await host.close();
      await store.close();
      const pages = opens("--open", path, 3);
      const toolPages = opens("--open-tool", path, 3);
      console.log(
        `${count}${onPostgres ? " (PostgreSQL)" : ""}: ${updates} updates logged after the snapshot (${Math.round(loggedMs)} ms); first page of a fresh process ${shown(pages)}; the tool's first snapshot page ${shown(toolPages)} (load average ${loadavg()[0]?.toFixed(1)})`,
      );
    } finally {
      rmSync(directory, { recursive: true, force: true });
      await copy?.drop();
    }
  }
}
