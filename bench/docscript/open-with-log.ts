/**
 * Open with a log (issue 25, point 4): the first page of a document whose snapshot is followed by 100
 * small logged updates. Per size, a copy of the scale bench's seeded timeline gets 100 one-field pushes
 * from another peer through a `DocumentHost` that does not compact; then a fresh process (as a server
 * started after them) opens the store and asks for the first page of 50 entities (`host.entityPage`):
 * the store's open and the page (its rows, the issues kept with them and the version, from the stored
 * snapshot version and the 100 updates' headers: the document is not loaded, ADR 0488). Each open
 * prints its wall time and its process's CPU time over the same span.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/docscript/open-with-log.ts [entityCounts...]   # 100000 1000000
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { LoroDoc, type LoroMap } from "loro-crdt";
import { createSqliteDocumentStore, DocumentHost } from "../../packages/docscript/src/server/index.ts";
import { timelineSchema } from "../../packages/docscript/src/timeline/timeline-schema.ts";
import { seedFile } from "./scale-harness.ts";

const updates = 100;
const never = { compactEvery: 1_000_000, compactLogBytes: 2 ** 40, compactAgeMs: 1e12 };

if (process.argv[2] === "--open") {
  // The fresh process: open the store and the document, and read the first page.
  const path = process.argv[3] as string;
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  const store = createSqliteDocumentStore({ path });
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
  const requested = process.argv
    .slice(2)
    .map(Number)
    .filter((count) => count > 0);
  for (const count of requested.length > 0 ? requested : [100_000, 1_000_000]) {
    const { path: seeded, seed } = seedFile(count);
    const directory = mkdtempSync(join(tmpdir(), "docscript-open-with-log-"));
    try {
      const path = join(directory, "doc.sqlite");
      copyFileSync(seeded, path);
      const store = createSqliteDocumentStore({ path });
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
      const opens: { ms: number; cpuMs: number }[] = [];
      for (let sample = 0; sample < 3; sample++) {
        const child = spawnSync(
          process.execPath,
          ["--conditions=@tackle/source", new URL(import.meta.url).pathname, "--open", path],
          { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] },
        );
        if (child.status !== 0) throw new Error(`the open failed (${child.status})`);
        opens.push(JSON.parse(child.stdout.trim()) as { ms: number; cpuMs: number });
      }
      console.log(
        `${count}: ${updates} updates logged after the snapshot (${Math.round(loggedMs)} ms); first page of a fresh process ${opens.map(({ ms, cpuMs }) => `${Math.round(ms)} ms (CPU ${Math.round(cpuMs)})`).join(", ")} (load average ${loadavg()[0]?.toFixed(1)})`,
      );
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  }
}
