/**
 * Where the document server keeps documents: an update log per document plus its latest compacted
 * snapshot, and the document's rows as JSON (its projection), kept by every append.
 */
import { hasBrand, setBrand } from "@tackle/core/internal";
import type { DocumentIssue } from "../schema/types.ts";
import type { ChangeFacts, ChangePage } from "./change-log.ts";

export interface LoggedUpdate {
  readonly seq: number;
  readonly bytes: Uint8Array;
}

export interface StoredDocument {
  readonly tokenHash: string;
  /** The compacted snapshot; it holds every update up to `snapshotSeq`. */
  readonly snapshot: Uint8Array;
  readonly snapshotSeq: number;
  /** Updates after `snapshotSeq`, in order. */
  readonly updates: readonly LoggedUpdate[];
  /**
   * The snapshot's version (a Loro version vector, encoded), stored beside it (migration 8); undefined
   * for a snapshot stored without it, until a server that loads the document keeps it.
   */
  readonly snapshotVersion?: Uint8Array | undefined;
}

/** A stored document without its snapshot: what a page needs to know of it (ADR 0488). */
export type StoredHead = Omit<StoredDocument, "snapshot">;

/** Which root map a row belongs to. */
export type RowRoot = "entities" | "relations";

/** A row as an update left it: its JSON (the row map's plain value), or undefined when it was deleted. */
export interface RowChange {
  readonly root: RowRoot;
  readonly rowId: string;
  readonly json: unknown;
  /** The entities and relations the row projects to (none for a deleted row). */
  readonly members?: readonly RowMember[];
  /**
   * What the row projected to before this change, when the writer read it (a push's check): a store
   * may keep members that are the same but for their numbers, and write only the row and its numbers.
   */
  readonly previousMembers?: readonly RowMember[];
  /**
   * The row's maps (ADR 0514): `[containerId, path]` for its own map (path `[]`) and each map reached
   * from it through map keys, replacing what the store held for the row; `"kept"`: the row's maps are
   * those the store holds (only plain values were written into them); absent: not known, and the store
   * forgets what it held for the row. A deleted row's are forgotten.
   */
  readonly containers?: readonly ContainerEntry[] | "kept";
}

/** One map of a row: its container id and the keys from the row's map down to it. */
export type ContainerEntry = readonly [containerId: string, path: readonly string[]];

/** Where a map sits in the stored rows: its row, and the keys from the row's map down to it. */
export interface ContainerPlace {
  readonly root: RowRoot;
  readonly rowId: string;
  readonly path: readonly string[];
}

/** An entity or relation a row projects to. */
export interface RowMember {
  readonly type: "entity" | "relation";
  readonly id: string;
  readonly kind: string;
  readonly endpoint0?: string;
  readonly endpoint1?: string;
  readonly variantOf?: string;
  /** An entity's identity key (kinds with an identity: one entity per key). */
  readonly identity?: string;
  /**
   * An entity's number fields, by name, as the store indexes them for windows (`MemberQuery.range`):
   * its own value, or null for a variant's field it takes from its base (a candidate of every window).
   * A field holding no number is left out.
   */
  readonly numbers?: Readonly<Record<string, number | null>>;
}

/** A window on an entity's number field: `from` ≤ value < `to` (either bound may be left out). */
export interface NumberRange {
  readonly field: string;
  readonly from?: number | undefined;
  readonly to?: number | undefined;
}

/** A member found by a query, with the row that stores it. */
export interface FoundMember extends RowMember {
  readonly root: RowRoot;
  readonly rowId: string;
  readonly json: unknown;
}

/** A page of entities or relations, in id order (bytewise). */
export interface MemberQuery {
  readonly type: "entity" | "relation";
  readonly kinds?: readonly string[] | undefined;
  readonly ids?: readonly string[] | undefined;
  /** Relations with this entity id as either endpoint. */
  readonly endpoint?: string | undefined;
  /** Relations with any of these entity ids as either endpoint. */
  readonly endpoints?: readonly string[] | undefined;
  /** Entities that are variants of this one. */
  readonly variantOf?: string | undefined;
  /** Entities that are variants of any of these. */
  readonly variantsOf?: readonly string[] | undefined;
  readonly identity?: string | undefined;
  /** Entities of any of these identities. */
  readonly identities?: readonly string[] | undefined;
  /**
   * Entities (of `kinds`) whose number field lies in the window, read from the store's index of number
   * fields, plus every variant taking that field from its base: candidates the reader checks against
   * the entity as it sees it. On a document whose numbers are not indexed yet (stored before the index,
   * `numbersIndexed` false) the window is not applied: every entity of the kinds is a candidate.
   */
  readonly range?: NumberRange | undefined;
  /**
   * Relations of one kind that `holder` holds in order (relation rows naming it as endpoint0; a slot's
   * relation is never ordered), sorted by position (a missing or non-text position as "") then id:
   * the first `limit` of them, or with `from: "last"` the last `limit`, last first. Read from the
   * store's index of positions (migration 10), so an append or a move finds its neighbours without
   * reading a track's thousands of clips. The other filters and `after` do not apply.
   */
  readonly ordered?: OrderedQuery | undefined;
  readonly after?: string | undefined;
  readonly limit: number;
  /**
   * Members only: the rows they live in are named, not read (`json` absent). A reader that holds the
   * rows already (a bulk write checking every claim of the entities a listing brought) asks this way.
   */
  readonly bare?: boolean | undefined;
}

/** The ordered relations of one holder and kind, from their first or their last (`MemberQuery.ordered`). */
export interface OrderedQuery {
  readonly holder: string;
  readonly kind: string;
  readonly from: "first" | "last";
}

/** One row of the projection a store keeps. */
export interface ProjectedRow {
  readonly root: RowRoot;
  readonly rowId: string;
  /** The row's `kind` ("" when it names none). */
  readonly kind: string;
  readonly json: unknown;
  /** The seq of the update that last wrote the row (0: the document as created). */
  readonly version: number;
}

/** A page of rows, in row id order (bytewise). */
export interface RowQuery {
  readonly root: RowRoot;
  readonly kinds?: readonly string[] | undefined;
  readonly ids?: readonly string[] | undefined;
  /** Relations with this entity id as either endpoint (relations root only). */
  readonly endpoint?: string | undefined;
  /** Rows with ids after this one. */
  readonly after?: string | undefined;
  readonly limit: number;
}

export interface AppendInput {
  readonly documentId: string;
  /** The next sequence number; a store refuses it with `StoreConflictError` when another writer took it. */
  readonly seq: number;
  readonly bytes: Uint8Array;
  readonly status: "committed" | "conflicted";
  readonly actor?: string;
  /**
   * The rows the update changed, as it left them: written with the update in one transaction. The
   * projection then holds through `seq` when it held through `seq - 1`; otherwise (rows not given, or
   * the projection was behind) it stays behind until `replaceRows`.
   */
  readonly rows?: readonly RowChange[];
  /** What the change log records of it, in the same transaction as the update (none when absent). */
  readonly change?: ChangeFacts;
  /** The document's issues after the update (stored with the rows). */
  readonly issues?: readonly DocumentIssue[];
  /** The plan ids the update applied, each with the version it took the document to (the plan index). */
  readonly plans?: ReadonlyMap<string, string>;
}

export interface DocumentStore {
  /**
   * False when the document exists already. `rows` is its projection (it holds through seq 0);
   * `plans`, the plan ids the snapshot's history carries with their version: given, the plan index
   * holds the document's whole history (`appliedPlans` answers).
   */
  createDocument(input: {
    documentId: string;
    tokenHash: string;
    snapshot: Uint8Array;
    /** The snapshot's version, encoded (`StoredDocument.snapshotVersion`). */
    snapshotVersion?: Uint8Array;
    rows?: readonly RowChange[];
    issues?: readonly DocumentIssue[];
    plans?: ReadonlyMap<string, string>;
  }): Promise<boolean>;
  tokenHash(documentId: string): Promise<string | undefined>;
  load(documentId: string): Promise<StoredDocument | undefined>;
  /** The document as `load` reads it, without the snapshot (stores that keep the snapshot's version). */
  loadHead?(documentId: string): Promise<StoredHead | undefined>;
  /** Stores the version of the snapshot held through `snapshotSeq`, when that snapshot has none stored. */
  keepSnapshotVersion?(documentId: string, snapshotSeq: number, version: Uint8Array): Promise<void>;
  updatesAfter(documentId: string, seq: number): Promise<LoggedUpdate[]>;
  /** The seq the stored snapshot holds through (undefined: no such document). */
  snapshotSeq?(documentId: string): Promise<number | undefined>;
  append(input: AppendInput): Promise<void>;
  /**
   * The document's change log, newest first: at most `limit` entries with a seq below `before` (all
   * when absent), and a cursor when older ones remain. Stores without it answer the route 501.
   */
  changes?(documentId: string, options: { before?: number; limit: number }): Promise<ChangePage>;
  /** The seq the stored rows hold through; undefined when they are not kept (a document stored before them). */
  rowsSeq(documentId: string): Promise<number | undefined>;
  /**
   * Replaces every row of the document with `rows`, read at `throughSeq`; refused (false) when the log
   * has moved past `throughSeq` meanwhile.
   */
  replaceRows(
    documentId: string,
    throughSeq: number,
    rows: readonly RowChange[],
    issues: readonly DocumentIssue[],
  ): Promise<boolean>;
  /**
   * Writes the rows an update already in the log changed (as it left them) and the issues after it,
   * when the rows hold through `seq - 1`; false (nothing written) when they do not: another server
   * wrote them first, or they are further behind.
   */
  advanceRows(
    documentId: string,
    seq: number,
    rows: readonly RowChange[],
    issues: readonly DocumentIssue[],
  ): Promise<boolean>;
  /** The document's issues as of `rowsSeq` (undefined: not kept). */
  documentIssues(documentId: string): Promise<DocumentIssue[] | undefined>;
  /** A page of entities or relations, in id order, each with its row. */
  readMembers(documentId: string, query: MemberQuery): Promise<FoundMember[]>;
  /**
   * Whether every entity's number fields are in the store's window index (documents created or whose
   * rows were replaced since migration 7); false until `indexNumbers` has run on an older document.
   */
  numbersIndexed(documentId: string): Promise<boolean>;
  /**
   * Indexes the number fields of every stored row (`numbersOf` reads them off a row, with the schema),
   * for a document stored before the index: in chunks of rows, each in a transaction of its own.
   */
  indexNumbers(
    documentId: string,
    numbersOf: (root: RowRoot, rowId: string, json: unknown) => readonly RowMember[],
  ): Promise<void>;
  /**
   * Which of `planIds` were applied to the document, each with the version it took the document to
   * (the plan index, migration 9); undefined when the index does not hold the document's whole
   * history (a document stored before it, until `indexPlans`).
   */
  appliedPlans(documentId: string, planIds: readonly string[]): Promise<Map<string, string> | undefined>;
  /**
   * Records every plan the document's history applied (read off it by the caller) and marks the plan
   * index whole; plans an append recorded meanwhile are kept.
   */
  indexPlans(documentId: string, plans: ReadonlyMap<string, string>): Promise<void>;
  /**
   * Where each of `containerIds` sits in the stored rows (ADR 0514), for those the store holds: maps of
   * rows written with their `containers`, as of `rowsSeq`. A store without the index leaves it out.
   */
  containerPlaces?(documentId: string, containerIds: readonly string[]): Promise<Map<string, ContainerPlace>>;
  /** How many entities and relations each kind has. */
  countMembers(documentId: string): Promise<{ type: "entity" | "relation"; kind: string; count: number }[]>;
  /** A page of rows, in id order. */
  readRows(documentId: string, query: RowQuery): Promise<ProjectedRow[]>;
  /** How many rows each kind has, per root. */
  countRows(documentId: string): Promise<{ root: RowRoot; kind: string; count: number }[]>;
  /**
   * Replaces the snapshot with one holding every update through `throughSeq`, and drops those updates;
   * `snapshotVersion` is the new snapshot's version, encoded.
   */
  compact(
    documentId: string,
    snapshot: Uint8Array,
    throughSeq: number,
    snapshotVersion?: Uint8Array,
  ): Promise<void>;
  /**
   * Stores several servers share (PostgreSQL): holds the document's lock across processes until the
   * returned release is called, so one server at a time catches up, checks and appends a push.
   */
  lockDocument?(documentId: string): Promise<() => Promise<void>>;
  /**
   * Stores several servers share (PostgreSQL, by LISTEN/NOTIFY): calls `listener` with the document
   * id after any server appended to it. Resolves once listening; the returned stop ends it. `missed`
   * is called when it listens again after losing its connection: appends meanwhile were not announced.
   */
  watchAppends?(listener: (documentId: string) => void, missed?: () => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

const storeConflictBrand = Symbol.for("tackle.docscript-store-conflict");

/** Another writer appended first; the caller catches up and checks again. */
export class StoreConflictError extends Error {
  constructor(documentId: string, seq: number, cause?: unknown) {
    super(`update ${seq} of document ${documentId} was written by another writer`, { cause });
    this.name = "StoreConflictError";
    setBrand(this, storeConflictBrand);
  }

  static isInstance(value: unknown): value is StoreConflictError {
    return hasBrand(value, storeConflictBrand);
  }
}

/** The columns a row is stored with: its kind and, for a relation, its endpoints. */
export function rowColumns(change: RowChange): {
  kind: string;
  payload: string;
  endpoint0: string | null;
  endpoint1: string | null;
} {
  const json = change.json as Record<string, unknown> | null;
  const text = (key: string): string | null =>
    typeof json === "object" && json !== null && typeof json[key] === "string" ? (json[key] as string) : null;
  const relation = change.root === "relations";
  return {
    kind: text("kind") ?? "",
    payload: JSON.stringify(change.json ?? null),
    endpoint0: relation ? text("endpoint0") : null,
    endpoint1: relation ? text("endpoint1") : null,
  };
}
