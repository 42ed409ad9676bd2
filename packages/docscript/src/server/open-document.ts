/** A document the server keeps open in memory, and what its parts share about it. */
import type { IdSpan, LoroDoc } from "loro-crdt";
import type { ContainerIndex } from "../document/container-index.ts";
import type { OnDemandProjection } from "../document/on-demand-projection.ts";
import type { DocumentIssue } from "../schema/types.ts";
import { appliedPlans } from "./push-checks.ts";

export interface OpenDocument {
  doc: LoroDoc;
  /** A replica of `doc` that pushes are imported into first; undefined after a rejection polluted it. */
  shadow: LoroDoc | undefined;
  /**
   * Set when a push's fork became the live document (a large update, ADR 0496): the next replica is
   * forked from it, not read from the store (whose log holds that update, to be imported again).
   */
  forkNext?: boolean;
  /** Row of every container seen; shared by the live document and its forks (containers never move). */
  readonly index: ContainerIndex;
  /**
   * The rows the checks of pushes looked up, as entities and relations: read from the store's rows on
   * demand (opening reads none), kept in step with every update after.
   */
  /** Only the rows its checks looked up, read from the store on demand (ADR 0465, 0485). */
  projection: OnDemandProjection;
  /** The document's issues (whole document), kept in step by each push; undefined until needed. */
  issues: DocumentIssue[] | undefined;
  seq: number;
  snapshotSeq: number;
  /** Bytes of the updates after the snapshot, and when the first of them was seen (undefined: none). */
  logBytes: number;
  logSince: number | undefined;
  tokenHash: string;
  /**
   * Every plan id applied to the document (read off its changes' messages) and the version it took it
   * to; read on first need (reading the history of a large document costs seconds), then kept up.
   */
  plans: Map<string, string> | undefined;
}

/** What the log after a document's snapshot holds: what its compaction bounds are checked against (ADR 0477). */
export type LogState = Pick<OpenDocument, "seq" | "snapshotSeq" | "logBytes" | "logSince">;

/** Rows a document's projection keeps holding between pushes; past this it starts empty again. */
export const heldRowsBound = 20_000;

/**
 * Rows a document's projection may come to hold by taking what the server read for a tool (ADR 0515):
 * enough for the window pages of a shift of a third of 100,000 entities.
 */
export const servedRowsBound = 2 * heldRowsBound;

export /** The store's rows are not at the seq the projection reading them is at (another server moved them). */
class StaleRowsError extends Error {
  constructor(documentId: string, seq: number, rowsSeq: number | undefined) {
    super(`the rows of ${documentId} hold through ${rowsSeq ?? "nothing"}, not ${seq}`);
    this.name = "StaleRowsError";
  }
}

/** How a push is made: by a host credential (it may set host-only fields), and whether to apply past lost writes. */
export interface PushOptions {
  readonly actor?: string;
  /** The caller holds a host credential: it may set host-only fields. */
  readonly host?: boolean;
  /** Store the update even when some of its writes no longer apply (they are reported, the rest applies). */
  readonly applyRemaining?: boolean;
}

export /** The document's plan index, read off its history on first need. */
function plansOf(open: OpenDocument): Map<string, string> {
  open.plans ??= appliedPlans(open.doc);
  return open.plans;
}

export /**
 * Imports logged updates into a document one at a time. Loro's `importBatch` detaches the document,
 * imports, then checks the state out again: a diff of the whole state (7.5 s of CPU for 99 one-field
 * updates after a 100k-entity snapshot), where each `import` applies only its own ops (60 ms for the
 * same 99).
 */
function importLogged(doc: LoroDoc, updates: readonly { readonly bytes: Uint8Array }[]): void {
  for (const update of updates) doc.import(update.bytes);
}

export /** Loro throws values that are not Errors; keep whatever they say. */
function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Update atoms below which the live document imports a stored push itself (a fork costs more). */
export const forkTakesOverAtoms = 1_024;

export /**
 * Whether a stored push's fork takes the live document's place (ADR 0496): when its update is large
 * beside the document's history. Importing it again costs as much as the fork's import did (Loro's
 * first write to each container it touches: ~0.1 ms a container at 100k entities), and making the next
 * push's replica by a fork costs what the document's state does (~0.3 s at 100k entities); past one
 * atom in 64 of the history (~15,000 atoms at 100k entities) the fork is the cheaper.
 */
function forkTakesOver(fork: LoroDoc, spans: readonly IdSpan[], minAtoms = forkTakesOverAtoms): boolean {
  // 0: every push's fork takes over (tests play the concurrency property through this path).
  if (minAtoms === 0) return true;
  let atoms = 0;
  for (const span of spans) atoms += span.length;
  if (atoms < minAtoms) return false;
  let history = 0;
  for (const [, counter] of fork.oplogVersion().toJSON()) history += counter;
  return atoms * 64 >= history;
}

/**
 * Updates stored and not imported into their open document's live Loro document yet (ADR 0517), and a
 * detached replica that holds their ops (not their state): what a pull exports meanwhile.
 */
interface Behind {
  readonly updates: Uint8Array[];
  oplog: LoroDoc;
}

const behindOf = new WeakMap<OpenDocument, Behind>();
/** Each open document's live Loro document, behind its accessor (`openDocumentOf`). */
const liveOf = new WeakMap<OpenDocument, LoroDoc>();

/**
 * An open document whose `doc` is read through an accessor: updates stored while the live document
 * lacks them (`importLater`: a push judged in a detached replica, ADR 0517) are imported on the first
 * read of `doc`, so no call ever reads the live document behind what the store holds.
 */
export function openDocumentOf(fields: Omit<OpenDocument, "doc">, doc: LoroDoc): OpenDocument {
  const open = { ...fields } as OpenDocument;
  liveOf.set(open, doc);
  Object.defineProperty(open, "doc", {
    enumerable: true,
    get(): LoroDoc {
      while (catchUpSlice(open)) {}
      return liveOf.get(open) as LoroDoc;
    },
    set(next: LoroDoc) {
      behindOf.delete(open);
      liveOf.set(open, next);
    },
  });
  return open;
}

/**
 * Has `open.doc` import `updates` (in order; the last the stored update, those before it parts of it)
 * on its next read, or a slice at a time (`catchUpSlice`); `oplog`, a detached replica holding their
 * ops, answers what reads only ops meanwhile (`opsOf`).
 */
export function importLater(open: OpenDocument, updates: readonly Uint8Array[], oplog: LoroDoc): void {
  const behind = behindOf.get(open);
  if (behind === undefined) behindOf.set(open, { updates: [...updates], oplog });
  else {
    behind.updates.push(...updates);
    behind.oplog = oplog;
  }
}

/**
 * Imports the next update the live document lacks: whether more are left. One that fails to import
 * stays first, and fails every read of the document after it.
 */
export function catchUpSlice(open: OpenDocument): boolean {
  const behind = behindOf.get(open);
  const live = liveOf.get(open);
  const next = behind?.updates[0];
  if (behind === undefined || live === undefined || next === undefined) return false;
  live.import(next);
  behind.updates.shift();
  if (behind.updates.length === 0) behindOf.delete(open);
  return isBehind(open);
}

/** Whether `open.doc` still has stored updates to import. */
export function isBehind(open: OpenDocument): boolean {
  return behindOf.has(open);
}

/**
 * The document's ops as stored, for what reads only ops (a pull's export, a version): the live document,
 * or while it is behind (`importLater`) the detached replica that holds them.
 */
export function opsOf(open: OpenDocument): LoroDoc {
  return behindOf.get(open)?.oplog ?? open.doc;
}
