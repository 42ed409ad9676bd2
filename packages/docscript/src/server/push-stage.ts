/**
 * A run's update handed to the server in parts while the run goes on (ADR 0508): each part is imported
 * into the document's shadow (the replica pushes are imported into), checked for what no row can hold,
 * its rows found, and those rows read in small slices while the server is otherwise idle. Field values
 * set into maps the store's index places are held in a detached shadow, ops without state, their rows
 * patched from the stored JSON (ADR 0514, 0517); anything else moves the parts to an attached one.
 * When the push carrying the whole update comes, its import finds those ops already there and its
 * check reuses the rows read; the push is judged exactly as it would be without the parts (the shadow
 * holds the live document and the push's ops, nothing else, or the parts are dropped).
 */
import {
  decodeImportBlobMeta,
  type Frontiers,
  type ImportBlobMetadata,
  type JsonChange,
  type LoroDoc,
} from "loro-crdt";
import { RELATIONS } from "../document/layout.ts";
import { readyForImportOf } from "../document/ready-for-imports.ts";
import { type ChangedRows, rowsOfSpans, spansOfUpdate } from "./changed-rows.ts";
import type { ContainerPlace } from "./document-store.ts";
import type { FieldVerdict } from "./field-writes.ts";
import type { OpenDocument } from "./open-document.ts";
import { changesIn, planIdsOf, unreadableKeys } from "./push-checks.ts";
import type { RowShape } from "./push-staging.ts";
import { containersWritten, type FieldSet, fieldSetOf } from "./row-containers.ts";

/** What one run staged in a shadow: its peer's ops from `start` to `end`, and the rows they touched. */
export interface StagedParts {
  /** The run's peer: a run writes on a peer of its own, so its parts are that peer's ops alone. */
  readonly peer: string;
  /** The live document's frontiers when the first part came: what the shadow held besides the parts. */
  readonly from: Frontiers;
  readonly start: number;
  end: number;
  bytes: number;
  lastAt: number;
  /** Rows read since the last part that touched them, as the shadow holds them. */
  readonly entities: Map<string, unknown>;
  readonly relations: Map<string, unknown>;
  /** Rows the parts touched and not read since. */
  readonly unreadEntities: Set<string>;
  readonly unreadRelations: Set<string>;
  /** Rows read whose check's lookups the projection has not been asked to hold yet. */
  readonly unwarmed: { readonly entities: Set<string>; readonly relations: Set<string> };
  /**
   * Per row the parts touched, the plain values they set into the row's indexed maps, in order
   * (ADR 0514), or `"whole"`: some op of theirs did more, and the row is read out of Loro.
   */
  readonly sets: {
    readonly entities: Map<string, FieldSet[] | "whole">;
    readonly relations: Map<string, FieldSet[] | "whole">;
  };
  /** Rows read by patching their stored JSON: their maps are the ones the store holds. */
  readonly kept: { readonly entities: Set<string>; readonly relations: Set<string> };
  /** The depths of the maps the index placed: the push's depth check does not walk them again. */
  readonly depths: Map<string, number>;
  /** The plan ids the parts' changes carry (the push of parts held detached reads them here). */
  readonly planIds: Set<string>;
  /** What each row read wrote, told as it was warmed: the push's check does not compare it again. */
  readonly verdicts: Map<string, FieldVerdict>;
  /** Each `entities` row read, as `readRow` reads it, when warmed: the push sets it without reading it. */
  readonly shapes: Map<string, RowShape>;
  /**
   * The parts' bytes while the shadow is detached (ADR 0517): it holds their ops, not their state;
   * undefined once the parts are in an attached replica (`attachedShadow`).
   */
  held: Uint8Array[] | undefined;
  /** Whether a slice of reads is queued. */
  reading: boolean;
}

/** The parts staged in a shadow, kept with it: a shadow dropped or replaced drops them. */
const stagedIn = new WeakMap<LoroDoc, StagedParts>();

/** What a shadow holds of a run's update (undefined: nothing staged). */
export function stagedOf(shadow: LoroDoc | undefined): StagedParts | undefined {
  return shadow === undefined ? undefined : stagedIn.get(shadow);
}

/** A staged run's parts give way to another run's once none came for this long (that run ended). */
export const stagedIdleMs = 30_000;

/** What the server answers a part. */
export interface StageAnswer {
  readonly staged: boolean;
  /** Why a part was not staged (the push is judged without it, as any push). */
  readonly reason?: string;
}

/**
 * A part staged or not, and whether the shadow took ops it must not keep (the caller drops it).
 * `early`: it may follow a part of its run still on its way (parts travel on separate connections and
 * may arrive out of order): past the parts of its run staged so far, or made on ops of its own peer
 * the server holds nowhere while nothing is staged (the run's first part still to come, or a run
 * built on its own changes never pushed, whose part never fits). It may be tried again later.
 */
type PartOutcome = StageAnswer & {
  readonly dropShadow?: boolean;
  readonly early?: boolean;
  /** The shadow that now holds the parts, when the one given was replaced (`attachedShadow`). */
  readonly shadow?: LoroDoc;
};

const refused = (reason: string): PartOutcome => ({ staged: false, reason });

/** Where the store's container index places containers (ADR 0514); absent ones it does not hold. */
export type PlacesOf = (containerIds: readonly string[]) => Promise<ReadonlyMap<string, ContainerPlace>>;

/**
 * Stages one part of a run's update in `shadow`, a replica of `open.doc` (or one holding only this
 * run's earlier parts beside it). At most `maxBytes` staged in all. Refused, with nothing imported,
 * when the part is not the next of one peer's ops or depends on ops the shadow lacks. `placesOf`: the
 * store's container index, which finds the rows of the maps it holds without walking their parents,
 * and lets a row whose maps the part only set plain values into be patched instead of read.
 */
export async function stagePart(
  open: OpenDocument,
  shadow: LoroDoc,
  bytes: Uint8Array,
  maxBytes: number,
  now = Date.now(),
  placesOf?: PlacesOf,
): Promise<PartOutcome> {
  let meta: ReturnType<typeof decodeImportBlobMeta>;
  try {
    meta = decodeImportBlobMeta(bytes, true);
  } catch {
    return refused("the part is not a Loro update");
  }
  if (meta.mode !== "update" && meta.mode !== "outdated-update") return refused("a part is an update");
  const spans = spansOfUpdate(meta);
  const span = spans[0];
  if (spans.length !== 1 || span === undefined) return refused("a part carries the ops of one peer");
  const peer = String(span.peer);
  const staged = stagedIn.get(shadow);
  const notFollowing = "the part does not follow the staged ones";
  if (staged === undefined) {
    if (shadow.cmpFrontiers(shadow.oplogFrontiers(), open.doc.frontiers()) !== 0)
      return refused("the shadow is not a replica of the document");
    // Made on its own run's ops the server holds nowhere: an earlier part of the run still to come,
    // or changes of its own never pushed.
    const held = shadow.oplogVersion();
    if (meta.startFrontiers.some((id) => String(id.peer) === peer && (held.get(id.peer) ?? 0) <= id.counter))
      return { ...refused("the part depends on changes the server does not hold"), early: true };
  } else {
    if (staged.peer !== peer) return refused("another run's update is staged");
    if (span.counter > staged.end) return { ...refused(notFollowing), early: true };
    if (span.counter !== staged.end) return refused(notFollowing);
  }
  if ((open.doc.oplogVersion().get(span.peer) ?? 0) >= span.counter + span.length)
    return refused("the part is in the document already");
  const held = shadow.oplogVersion();
  if (!meta.startFrontiers.every((id) => (held.get(id.peer) ?? 0) > id.counter))
    return refused("the part depends on changes the server does not hold");
  if ((staged?.bytes ?? 0) + bytes.byteLength > maxBytes)
    return refused(`the parts would carry more than ${maxBytes} bytes`);
  return takePart(open, shadow, bytes, meta, { peer, counter: span.counter }, now, placesOf);
}

/**
 * Stages what a push carries past the parts staged before it (ADR 0517), when the shadow is detached:
 * its ops are imported and their rows patched like a part's, so the push is judged without reading
 * Loro's state. The outcome says when the shadow was replaced by an attached one, or is to be dropped.
 */
export function stagePushTail(
  open: OpenDocument,
  shadow: LoroDoc,
  bytes: Uint8Array,
  meta: ImportBlobMetadata,
  placesOf: PlacesOf | undefined,
): Promise<PartOutcome> {
  const parts = stagedIn.get(shadow);
  if (parts === undefined) return Promise.resolve({ staged: false });
  return takePart(
    open,
    shadow,
    bytes,
    meta,
    { peer: parts.peer, counter: parts.start },
    Date.now(),
    placesOf,
  );
}

/**
 * Imports a part (or a push's ops past its parts) into `shadow` and records the rows it touched. The
 * first part of a run the store's index can place goes into the shadow detached (ADR 0517): Loro then
 * keeps its ops without applying them to the state (a 500-op part: well under a millisecond against
 * ~40 ms attached, at 100k entities); while every op is a placed field set the rows are patched from
 * their stored JSON and nothing reads the state. The first op that is not one has the shadow replaced
 * by an attached replica holding every part (`attachedShadow`), read as before.
 */
async function takePart(
  open: OpenDocument,
  given: LoroDoc,
  bytes: Uint8Array,
  meta: ImportBlobMetadata,
  first: { readonly peer: string; readonly counter: number },
  now: number,
  placesOf: PlacesOf | undefined,
): Promise<PartOutcome> {
  let shadow = given;
  const staged = stagedIn.get(shadow);
  if (staged === undefined && placesOf !== undefined && !shadow.isDetached()) shadow.detach();
  const before = shadow.oplogFrontiers();
  try {
    readyForImportOf(bytes);
    const status = shadow.import(bytes);
    if (status.pending !== null && status.pending !== undefined && status.pending.size > 0)
      return { ...refused("the part depends on changes the server does not hold"), dropShadow: true };
  } catch {
    return { ...refused("the part does not import"), dropShadow: true };
  }
  const partSpans = shadow.findIdSpansBetween(before, shadow.oplogFrontiers()).forward;
  if (partSpans.length === 0 && staged !== undefined) return { staged: true };
  const changes = changesIn(shadow, partSpans);
  let places: ReadonlyMap<string, ContainerPlace>;
  try {
    places = placesOf === undefined ? new Map() : await placesOf(containersWritten(changes));
  } catch {
    // Without the index the part is staged as before it: every row read out of Loro.
    places = new Map();
  }
  // A placed map's depth is its path's (the row's map is 1 below its root); its row, the index's.
  const depths = new Map<string, number>();
  for (const [containerId, place] of places) {
    depths.set(containerId, place.path.length + 1);
    open.index.set(containerId, { root: place.root, rowId: place.rowId });
  }
  const { sets, unplaced } = placedSets(open, shadow, meta, changes, places);
  // An op that is not a placed field set is read out of Loro's state: from here on in an attached replica.
  if (shadow.isDetached() && unplaced.length > 0) {
    const attached = attachedShadow(open, shadow, staged, bytes);
    if (attached === undefined)
      return { ...refused("the document changed since the run's first part"), dropShadow: true };
    shadow = attached;
  }
  // Nothing of a part no row can hold is read (its push is refused when it comes).
  if (unreadableKeys(shadow, partSpans, changes, depths).length > 0)
    return { ...refused("the part writes what no row can hold"), dropShadow: true };
  // The rows the part touched, found once: those of its placed field sets by the index, the rest as
  // any push's are (read whole from then on).
  const whole = rowsOfSpans(shadow, partSpans, open.index, unplaced);
  const rows: ChangedRows = {
    entities: new Set([...whole.entities, ...sets.entities.keys()]),
    relations: new Set([...whole.relations, ...sets.relations.keys()]),
    foreignRoots: whole.foreignRoots,
  };
  const parts: StagedParts = staged ?? newParts(open, first, now);
  stagedIn.set(shadow, parts);
  if (shadow.isDetached()) parts.held?.push(bytes);
  else parts.held = undefined;
  for (const [containerId, depth] of depths) parts.depths.set(containerId, depth);
  for (const planId of planIdsOf(shadow, partSpans, changes)) parts.planIds.add(planId);
  recordSets(parts, rows, sets, whole);
  for (const rowId of rows.entities) {
    parts.entities.delete(rowId);
    parts.unreadEntities.add(rowId);
  }
  for (const rowId of rows.relations) {
    parts.relations.delete(rowId);
    parts.unreadRelations.add(rowId);
  }
  parts.end = Math.max(parts.end, shadow.oplogVersion().get(parts.peer as `${number}`) ?? 0);
  parts.bytes += bytes.byteLength;
  parts.lastAt = now;
  return shadow === given ? { staged: true } : { staged: true, shadow };
}

function newParts(
  open: OpenDocument,
  first: { readonly peer: string; readonly counter: number },
  now: number,
): StagedParts {
  return {
    peer: first.peer,
    from: open.doc.frontiers(),
    start: first.counter,
    end: first.counter,
    bytes: 0,
    lastAt: now,
    entities: new Map(),
    relations: new Map(),
    unreadEntities: new Set(),
    unreadRelations: new Set(),
    unwarmed: { entities: new Set(), relations: new Set() },
    sets: { entities: new Map(), relations: new Map() },
    kept: { entities: new Set(), relations: new Set() },
    depths: new Map(),
    planIds: new Set(),
    verdicts: new Map(),
    shapes: new Map(),
    held: [],
    reading: false,
  };
}

/**
 * An attached replica of the live document holding what the detached `shadow` holds (the parts so far
 * and `bytes`), the parts moved to it (ADR 0517); undefined when the live document moved since the
 * first part (the parts then fit no push).
 */
export function attachedShadow(
  open: OpenDocument,
  shadow: LoroDoc,
  parts: StagedParts | undefined,
  bytes?: Uint8Array,
): LoroDoc | undefined {
  if (parts !== undefined && open.doc.cmpFrontiers(open.doc.frontiers(), parts.from) !== 0) return undefined;
  const attached = open.doc.fork();
  for (const held of parts?.held ?? []) attached.import(held);
  if (bytes !== undefined) attached.import(bytes);
  if (parts !== undefined) {
    stagedIn.delete(shadow);
    stagedIn.set(attached, parts);
    parts.held = undefined;
  }
  return attached;
}

/** A part's field sets by the row the index places their map in, and its other ops. */
interface PlacedSets {
  readonly sets: { readonly entities: Map<string, FieldSet[]>; readonly relations: Map<string, FieldSet[]> };
  /** The part's changes with only the ops that are not such sets. */
  readonly unplaced: JsonChange[];
}

/**
 * The plain values a part set into maps the index places (ADR 0514), by row in op order, when the part
 * was made on everything the live document holds (each of its sets then wins over what the map held);
 * every other op, unplaced.
 */
function placedSets(
  open: OpenDocument,
  shadow: LoroDoc,
  meta: ImportBlobMetadata,
  changes: readonly JsonChange[],
  places: ReadonlyMap<string, ContainerPlace>,
): PlacedSets {
  const order = shadow.frontiersToVV(meta.startFrontiers).compare(open.doc.oplogVersion());
  const madeOnAll = order === 0 || order === 1;
  const sets = { entities: new Map<string, FieldSet[]>(), relations: new Map<string, FieldSet[]>() };
  if (!madeOnAll) return { sets, unplaced: [...changes] };
  const unplaced: JsonChange[] = [];
  for (const change of changes) {
    const others: JsonChange["ops"] = [];
    for (const op of change.ops) {
      const place = places.get(op.container);
      const set = fieldSetOf(op, place);
      if (set === undefined || place === undefined) {
        others.push(op);
        continue;
      }
      const byRow = place.root === RELATIONS ? sets.relations : sets.entities;
      const row = byRow.get(place.rowId);
      if (row === undefined) byRow.set(place.rowId, [set]);
      else row.push(set);
    }
    if (others.length > 0) unplaced.push({ ...change, ops: others });
  }
  return { sets, unplaced };
}

/**
 * Records what the part set in each row it touched (ADR 0514): its placed field sets, when every op of
 * the part on that row is one. A row some other op touched (`whole`), or touched by a part made on
 * less, is read whole from then on.
 */
function recordSets(
  parts: StagedParts,
  rows: ChangedRows,
  sets: PlacedSets["sets"],
  whole: ChangedRows,
): void {
  for (const [touched, held, partSets, wholeRows] of [
    [rows.entities, parts.sets.entities, sets.entities, whole.entities],
    [rows.relations, parts.sets.relations, sets.relations, whole.relations],
  ] as const) {
    for (const rowId of touched) {
      const before = held.get(rowId);
      const these = partSets.get(rowId);
      if (before === "whole" || these === undefined || wholeRows.has(rowId)) held.set(rowId, "whole");
      else held.set(rowId, before === undefined ? these : [...before, ...these]);
    }
  }
}

/**
 * Whether the parts staged in `open.shadow` are of the update `bytes` carries, made on the live
 * document as it is: the push then imports into the shadow as into a replica. Else the shadow holds
 * ops the push does not, and must not be judged with them.
 */
export function partsFitPush(open: OpenDocument, meta: ImportBlobMetadata): boolean {
  const parts = stagedOf(open.shadow);
  if (parts === undefined) return true;
  if (open.doc.cmpFrontiers(open.doc.frontiers(), parts.from) !== 0) return false;
  const start = meta.partialStartVersionVector.get(parts.peer as `${number}`) ?? 0;
  const end = meta.partialEndVersionVector.get(parts.peer as `${number}`) ?? 0;
  return start <= parts.start && end >= parts.end;
}

/**
 * Takes the parts out of `fork`, the shadow a push imports into: they say the frontiers the push is
 * judged from (the live document's when the first part came) and the rows they read.
 */
export function takeStaged(fork: LoroDoc): StagedParts | undefined {
  const parts = stagedIn.get(fork);
  stagedIn.delete(fork);
  return parts;
}
