/** Where the document server keeps documents: an update log per document plus its latest compacted snapshot. */
import { hasBrand, setBrand } from "@tackle/core";

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
}

export interface AppendInput {
  readonly documentId: string;
  /** The next sequence number; a store refuses it with `StoreConflictError` when another writer took it. */
  readonly seq: number;
  readonly bytes: Uint8Array;
  readonly status: "committed" | "conflicted";
  readonly actor?: string;
}

export interface DocumentStore {
  /** False when the document exists already. */
  createDocument(input: { documentId: string; tokenHash: string; snapshot: Uint8Array }): Promise<boolean>;
  tokenHash(documentId: string): Promise<string | undefined>;
  load(documentId: string): Promise<StoredDocument | undefined>;
  updatesAfter(documentId: string, seq: number): Promise<LoggedUpdate[]>;
  /** The seq the stored snapshot holds through (undefined: no such document). */
  snapshotSeq?(documentId: string): Promise<number | undefined>;
  append(input: AppendInput): Promise<void>;
  /** Replaces the snapshot with one holding every update through `throughSeq`, and drops those updates. */
  compact(documentId: string, snapshot: Uint8Array, throughSeq: number): Promise<void>;
  /**
   * Stores several servers share (PostgreSQL): holds the document's lock across processes until the
   * returned release is called, so one server at a time catches up, checks and appends a push.
   */
  lockDocument?(documentId: string): Promise<() => Promise<void>>;
  /**
   * Stores several servers share (PostgreSQL, by LISTEN/NOTIFY): calls `listener` with the document
   * id after any server appended to it. Resolves once listening; the returned stop ends it.
   */
  watchAppends?(listener: (documentId: string) => void): Promise<() => Promise<void>>;
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
