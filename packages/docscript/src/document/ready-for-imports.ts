/**
 * What Loro pays in the first import into a document copy, that a read can pay before a request waits
 * (ADR 0504). Measured with loro-crdt 1.17 at 100,000 entities (66,668 keys in `entities`, 33,332 in
 * `relations`), CPU of one import of five captions after a lazily loaded snapshot:
 * - its history's graph is loaded (~70 ms, whatever the import writes); a read of the version of the
 *   copy's frontiers loads it;
 * - a root map it writes to (a row created, deleted or replaced) has its state decoded whole (~0.45 s
 *   for `entities`, ~0.2 s for `relations`). Most reads do not decode it (`keys()`, `get`);
 *   `getLastEditor` does (it reads the per-key peers only the decoded state holds);
 * - it then allocates ~12 MiB. Taken from the WebAssembly memory's free space it costs nothing; when
 *   the allocator must grow the memory for it, in small steps, the steps cost 0.2–0.5 s. So free space
 *   is made here: one block allocated and freed (the allocator keeps what it grew the memory by, for
 *   the next allocations of any copy in the thread).
 * Nothing is written to the document.
 */
import { decodeImportBlobMeta, type ImportBlobMetadata, type LoroDoc } from "loro-crdt";
import { ENTITIES, RELATIONS } from "./layout.ts";
import { reserveLoroMemory } from "./loro-memory.ts";

const ready = new WeakSet<LoroDoc>();

/** Free memory made per key of the root maps: about twice what the first import takes (~125 bytes a key). */
const headroomPerKey = 256;
/** At most this much free memory is made at once. */
const maxHeadroom = 256 * 2 ** 20;

/** Whether `readyForImports` ran on `doc`. */
export function isReadyForImports(doc: LoroDoc): boolean {
  return ready.has(doc);
}

/** Pays, once per document copy and by reads only, what its first import would (see above). */
export function readyForImports(doc: LoroDoc): void {
  if (ready.has(doc)) return;
  doc.frontiersToVV(doc.frontiers());
  let keys = 0;
  for (const root of [ENTITIES, RELATIONS]) {
    const map = doc.getMap(root);
    map.getLastEditor("");
    keys += map.size;
  }
  ready.add(doc);
  makeHeadroom(Math.min(keys * headroomPerKey, maxHeadroom));
}

/** Free memory made per byte of an update before its import: a 100k shift's push (400 KB) took ~145. */
const headroomPerUpdateByte = 160;

/**
 * Makes room in Loro's memory for importing `update` (ADR 0502): one grow of the memory before the
 * import, not the many small ones the import would make inside one call, each a full marking of the heap.
 */
export function readyForImportOf(update: Uint8Array): void {
  makeHeadroom(Math.min(update.length * headroomPerUpdateByte, maxHeadroom));
}

/**
 * Makes room for importing `update` into `doc` as `readyForImportOf` does, for the share of its ops
 * `doc` does not hold yet: a push whose parts were staged into the fork first (ADR 0508) imports
 * little, and room made for all of it cost the 100k shift's push ~0.6 s of copying zeros.
 */
export function readyForImportInto(doc: LoroDoc, update: Uint8Array, meta: ImportBlobMetadata): void {
  const held = doc.oplogVersion();
  let atoms = 0;
  let lacking = 0;
  for (const [peer, end] of meta.partialEndVersionVector.toJSON()) {
    const start = meta.partialStartVersionVector.get(peer) ?? 0;
    atoms += Math.max(0, end - start);
    lacking += Math.max(0, end - Math.max(start, held.get(peer) ?? 0));
  }
  const share = atoms === 0 ? 1 : lacking / atoms;
  makeHeadroom(Math.min(update.length * headroomPerUpdateByte * share, maxHeadroom));
}

/** Free memory made per key of the root maps before a run doc is made: 100k entities' took ~2.7 KiB. */
const runDocHeadroomPerKey = 2560;

/**
 * Makes room in Loro's memory for a run doc forked from `replica` (ADR 0502): the fork's checkouts and
 * first writes grow the memory by ~260 MiB at 100k entities inside single calls, in steps, each a full
 * marking of the heap (131 markings, 4.8 s of CPU; with the room made first: 1 marking, 1.5 s).
 */
export function readyForRunDoc(replica: LoroDoc): void {
  const keys = replica.getMap(ENTITIES).size + replica.getMap(RELATIONS).size;
  makeHeadroom(Math.min(keys * runDocHeadroomPerKey, maxHeadroom));
}

/**
 * Leaves at least `bytes` free in Loro's WebAssembly memory: a block allocated and freed, no page of it
 * touched (`reserveLoroMemory`). Where Loro's allocator cannot be reached, bytes passed to Loro are
 * copied into a block of its memory, freed when the call returns (zeros are not an update, so nothing
 * is decoded) — which touches every page twice: 256 MiB took 1.5–2 s of CPU on this project's 2-core
 * machines, against ~5 ms for the reservation.
 */
function makeHeadroom(bytes: number): void {
  if (bytes < 2 ** 20) return;
  if (reserveLoroMemory(bytes)) return;
  try {
    decodeImportBlobMeta(new Uint8Array(bytes), false);
  } catch {
    // Expected: zeros are not an update.
  }
}
