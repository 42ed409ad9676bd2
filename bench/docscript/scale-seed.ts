/**
 * Seeds the scale bench's document into a SQLite file, the way a server stores a created document:
 * the snapshot with its rows in one `createDocument`. The timeline is written as Loro JSON updates
 * and its rows written out from the same rows (`largeTimelineRows`, checked equal to a read of the
 * document by `large-timeline.test.ts`), so a million entities seed in minutes, not the ~25 min a read
 * of the document took. Run by `scale.ts` in a child process (its heap is not the bench's).
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/docscript/scale-seed.ts <entities> <file | postgres:// URL> [--overlay-every=N]
 */
import { LoroDoc } from "loro-crdt";
import { hashToken } from "../../packages/docscript/src/server/index.ts";
import { largeTimeline, largeTimelineRows } from "../../packages/docscript/test/large-timeline.ts";
import { openBenchStore } from "./bench-store.ts";

const count = Number(process.argv[2]);
const path = process.argv[3];
/** `--overlay-every=N`: every N-th added clip on an overlay track of its own (the tasks bench). */
const overlayEvery = process.argv
  .slice(4)
  .find((arg) => arg.startsWith("--overlay-every="))
  ?.split("=")[1];
const every = overlayEvery === undefined ? undefined : Number(overlayEvery);
if (!(count > 0) || path === undefined)
  throw new Error("usage: scale-seed.ts <entities> <file | postgres:// URL>");
const benchToken = "bench-document-token-0123456789";

const started = performance.now();
const extraClips = Math.max(0, Math.round((count - 12) / 3));
const { snapshot, firstClips, entityCount } = largeTimeline(extraClips, every);
const builtMs = performance.now() - started;
// A PostgreSQL URL seeds that database instead (`postgres-seed.ts`).
const store = await openBenchStore(path);
try {
  await store.createDocument({
    documentId: "bench",
    tokenHash: hashToken(benchToken),
    snapshot,
    // Beside the snapshot, so a page of the document is answered without loading it (ADR 0488).
    snapshotVersion: LoroDoc.fromSnapshot(snapshot).oplogVersion().encode(),
    rows: largeTimelineRows(extraClips, every),
    issues: [],
    // Its history carries no plan: the plan index holds it whole from the start, as a created one's.
    plans: new Map(),
  });
} finally {
  await store.close();
}
console.log(
  JSON.stringify({
    entityCount,
    firstClips,
    snapshotBytes: snapshot.byteLength,
    builtMs: Math.round(builtMs),
    storedMs: Math.round(performance.now() - started - builtMs),
  }),
);
