/**
 * The document server of the scale bench, in a process of its own (as in any deployment): `scale.ts`
 * forks it over a copy of the seeded SQLite file and talks to it over loopback HTTP (the tool) and
 * over the fork's IPC channel (the bench's own steps). It holds what a server holds: the live
 * document and the replica pushes are checked in. With `--peer <url> <seeded path>` it is instead
 * another peer, in a process of its own too: a replica of the seeded document that pulls what the
 * server has, then pushes a one-clip change over loopback HTTP when asked, timing the push.
 *
 *   fork(scale-server.ts, [path]) → { ready: url }
 *   fork(scale-server.ts, ["--peer", url, path]) → { ready: url }
 *   { op: "push", clipId, speed } → { ms, status }     (peer) one change, pushed and answered
 *   { op: "memory" } → { heapMiB, rssMiB, maxRssMiB }  this process's heap and RSS now, and its peak RSS
 *   { op: "close" }                                     closes the server and exits
 */
import { LoroDoc, type LoroMap } from "loro-crdt";
import { createDocumentClient } from "../../packages/docscript/src/index.ts";
import { serveDocuments } from "../../packages/docscript/src/server/index.ts";
import { timelineSchema } from "../../packages/docscript/src/timeline/timeline-schema.ts";
import { openBenchStore } from "./bench-store.ts";

const peerOf = process.argv[2] === "--peer" ? process.argv[3] : undefined;
const path = peerOf === undefined ? process.argv[2] : process.argv[4];
if (path === undefined || process.send === undefined) {
  console.error("usage: fork scale-server.ts [--peer <url>] <sqlite path> (with an IPC channel)");
  process.exit(2);
}
const token = "bench-document-token-0123456789";
const send = (message: unknown) => process.send?.(message);
const mib = (bytes: number) => Math.round(bytes / 1048576);

const server =
  peerOf === undefined
    ? await serveDocuments({
        // A PostgreSQL URL serves that database (`tasks.ts --store=postgres`).
        store: await openBenchStore(path),
        schema: timelineSchema,
      })
    : undefined;
const client =
  peerOf === undefined ? undefined : createDocumentClient({ origin: peerOf, token, timeoutMs: 600_000 });
/** Another peer's replica, read from the stored snapshot on its first push. */
let other: LoroDoc | undefined;

async function otherPeer(): Promise<LoroDoc> {
  if (other !== undefined) return other;
  const store = await openBenchStore(path as string);
  try {
    const stored = await store.load("bench");
    if (stored === undefined) throw new Error("the seeded file has no document");
    const doc = LoroDoc.fromSnapshot(stored.snapshot);
    doc.setPeerId(9);
    other = doc;
    return doc;
  } finally {
    await store.close();
  }
}

process.on("message", async (message: { op: string; clipId?: string; speed?: number }) => {
  try {
    if (message.op === "push") {
      const doc = await otherPeer();
      // Up to date first (untimed), as a client editing the document is: its change is not concurrent
      // with the tool's commits (a concurrent change at 1M costs the server Loro's history index).
      if (client !== undefined) await client.pullInto("bench", doc);
      const before = doc.oplogVersion();
      ((doc.getMap("entities").get(message.clipId ?? "") as LoroMap).get("fields") as LoroMap).set(
        "speed",
        message.speed ?? 1,
      );
      doc.commit();
      const update = doc.export({ mode: "update", from: before });
      const started = performance.now();
      const result = await client?.push("bench", update);
      send({ ms: performance.now() - started, status: result?.status });
    } else if (message.op === "cpu") {
      // CPU of the whole process (every thread), µs: the tasks bench's CPU columns.
      send(process.cpuUsage());
    } else if (message.op === "memory") {
      const usage = process.memoryUsage();
      send({
        heapMiB: mib(usage.heapUsed),
        rssMiB: mib(usage.rss),
        maxRssMiB: Math.round(process.resourceUsage().maxRSS / 1024),
      });
    } else if (message.op === "close") {
      await server?.close();
      send({ closed: true });
      process.disconnect();
    }
  } catch (error) {
    send({ error: (error as Error).message });
  }
});
send({ ready: server?.url ?? peerOf });
