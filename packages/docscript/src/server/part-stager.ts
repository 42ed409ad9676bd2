/**
 * The server's side of a run's parts (ADR 0508): each queued as idle work (`IdleWork`), bounded while
 * it waits, imported into the open document's shadow (`stagePart`; detached while it holds placed field
 * values alone, ADR 0517), its rows read a slice at a time and the push's lookups for them warmed
 * (`readStaged`, `warmStaged`); at the push, what it carries past its parts (`stageTail`).
 */
import type { Logger } from "@tackle/core";
import { decodeImportBlobMeta, type ImportBlobMetadata, type LoroDoc } from "loro-crdt";
import { ENTITIES } from "../document/layout.ts";
import { spansOfUpdate } from "./changed-rows.ts";
import type { DocumentStore } from "./document-store.ts";
import type { IdleWork } from "./idle-work.ts";
import { describeError, type OpenDocument } from "./open-document.ts";
import type { OpenDocuments } from "./open-documents.ts";
import {
  attachedShadow,
  type PlacesOf,
  type StageAnswer,
  stagedIdleMs,
  stagedOf,
  stagePart,
  stagePushTail,
} from "./push-stage.ts";
import { patchesAhead, readStaged, type StoredRow, warmStaged } from "./staged-reads.ts";

/** Fills made at most to hold the stored rows one slice patches (ADR 0514). */
const patchFills = 4;

/**
 * How long a part that came ahead of an earlier part of its run waits for it, tried again after each
 * pause, when that part has reached the server and waits too; then it is refused as not following.
 */
export const reorderForMs = 5_000;
/**
 * How long it waits when no earlier part of its run has reached the server: that one may be a moment
 * behind on another connection, or may never come (a run built on its own unpushed changes).
 */
export const reorderGraceMs = 50;
/** The pause before a part that came early is tried again. */
const reorderPauseMs = 5;

/** A part received and not answered yet: its peer and first counter (undefined: not an update). */
interface Received {
  readonly peer: string | undefined;
  readonly counter: number;
}

function receivedOf(bytes: Uint8Array): Received {
  try {
    const [span, ...more] = spansOfUpdate(decodeImportBlobMeta(bytes, true));
    return span === undefined || more.length > 0
      ? { peer: undefined, counter: 0 }
      : { peer: String(span.peer), counter: span.counter };
  } catch {
    return { peer: undefined, counter: 0 };
  }
}

export class PartStager {
  private readonly context: {
    readonly docs: OpenDocuments;
    readonly idle: IdleWork;
    readonly logger: Logger;
    /** The store, for its container index (ADR 0514). */
    readonly store?: DocumentStore;
  };
  /** Bytes of the parts waiting per document. */
  private readonly partsWaiting = new Map<string, number>();
  /** The parts received and not answered yet, per document. */
  private readonly received = new Map<string, Set<Received>>();

  constructor(context: {
    readonly docs: OpenDocuments;
    readonly idle: IdleWork;
    readonly logger: Logger;
    readonly store?: DocumentStore;
  }) {
    this.context = context;
  }

  /**
   * Stages a part of a run's update ahead of its push (ADR 0508): imported into the open document's
   * shadow and its rows read, as work done only while no call waits (`IdleWork`); a push first does
   * what is left of it. A part not staged is no error: its push is judged as any push.
   */
  stage(documentId: string, bytes: Uint8Array, maxBytes: number): Promise<StageAnswer> {
    // Parts waiting hold at most what one push may carry: a flood of them is refused at once.
    const waiting = this.partsWaiting.get(documentId) ?? 0;
    if (waiting + bytes.byteLength > maxBytes)
      return Promise.resolve({ staged: false, reason: "too many parts are waiting" });
    this.partsWaiting.set(documentId, waiting + bytes.byteLength);
    const part = receivedOf(bytes);
    const received = this.received.get(documentId) ?? new Set<Received>();
    received.add(part);
    this.received.set(documentId, received);
    const done = () => {
      const left = (this.partsWaiting.get(documentId) ?? 0) - bytes.byteLength;
      if (left > 0) this.partsWaiting.set(documentId, left);
      else this.partsWaiting.delete(documentId);
      received.delete(part);
      if (received.size === 0 && this.received.get(documentId) === received) this.received.delete(documentId);
    };
    // An earlier part of the same run received and not answered yet.
    const earlierWaits = () => {
      for (const other of received)
        if (other !== part && other.peer === part.peer && other.counter < part.counter) return true;
      return false;
    };
    const arrived = Date.now();
    return new Promise((resolve) => {
      const closing = () => {
        done();
        resolve({ staged: false, reason: "the server is closing" });
      };
      const staged = async () => {
        try {
          const outcome = await this.stageNow(documentId, bytes, maxBytes);
          // Ahead of a part of its run still on its way: queued again after a pause, behind what
          // came meanwhile (the queue is in order of arrival), for a while. Off the queue during the
          // pause: neither a spin nor a push's drain waits on it.
          const waited = Date.now() - arrived;
          if (
            outcome.early === true &&
            (waited < reorderGraceMs || (earlierWaits() && waited < reorderForMs))
          ) {
            setTimeout(() => this.context.idle.add(documentId, staged, closing), reorderPauseMs);
            return;
          }
          done();
          resolve(
            outcome.reason === undefined
              ? { staged: outcome.staged }
              : { staged: outcome.staged, reason: outcome.reason },
          );
        } catch (error) {
          done();
          resolve({ staged: false, reason: `the part was not staged: ${describeError(error)}` });
        }
      };
      this.context.idle.add(documentId, staged, closing);
    });
  }

  private async stageNow(
    documentId: string,
    bytes: Uint8Array,
    maxBytes: number,
  ): Promise<StageAnswer & { readonly early?: boolean }> {
    const open = this.context.docs.open.get(documentId);
    if (open === undefined) return { staged: false, reason: "the document is not open on this server" };
    // Another run's parts, left by a run that ended without pushing them, give way.
    const left = stagedOf(open.shadow);
    if (left !== undefined && Date.now() - left.lastAt > stagedIdleMs) open.shadow = undefined;
    const shadow = await this.context.docs.shadowOf(documentId, open);
    const outcome = await stagePart(open, shadow, bytes, maxBytes, Date.now(), this.placesOf(documentId));
    const { staged, reason, early } = outcome;
    this.afterPart(documentId, open, shadow, outcome);
    return { staged, ...(reason === undefined ? {} : { reason }), ...(early === undefined ? {} : { early }) };
  }

  /**
   * Stages what a push carries past its staged parts when they are held detached (ADR 0517), and reads
   * every row left unread: the push is then judged from the rows read, never from Loro's state. The
   * caller holds the document's turn.
   */
  async stageTail(documentId: string, open: OpenDocument, bytes: Uint8Array, meta: ImportBlobMetadata) {
    const shadow = open.shadow;
    if (shadow === undefined || !shadow.isDetached() || stagedOf(shadow) === undefined) return;
    const outcome = await stagePushTail(open, shadow, bytes, meta, this.placesOf(documentId));
    // Not staged: the push is judged as any push, in a replica made for it.
    if (!outcome.staged) open.shadow = undefined;
    else this.afterPart(documentId, open, shadow, outcome);
    while (open.shadow !== undefined && (await this.readSlice(documentId, open.shadow))) {}
  }

  /** The store's container index, when it has one (ADR 0514). */
  private placesOf(documentId: string): PlacesOf | undefined {
    const store = this.context.store;
    if (store?.containerPlaces === undefined) return undefined;
    return (containerIds) => store.containerPlaces?.(documentId, containerIds) ?? Promise.resolve(new Map());
  }

  /** The shadow after a part: dropped, replaced by an attached one, and its new rows' reading queued. */
  private afterPart(
    documentId: string,
    open: OpenDocument,
    shadow: LoroDoc,
    outcome: { readonly staged: boolean; readonly dropShadow?: boolean; readonly shadow?: LoroDoc },
  ): void {
    if (outcome.dropShadow === true && open.shadow === shadow) open.shadow = undefined;
    if (!outcome.staged) return;
    const now = outcome.shadow ?? shadow;
    if (open.shadow === shadow) open.shadow = now;
    this.readStagedLater(documentId, now);
  }

  /** Reads the rows staged in `shadow` a slice at a time, as idle work, until none is left unread. */
  private readStagedLater(documentId: string, shadow: LoroDoc): void {
    const parts = stagedOf(shadow);
    if (parts === undefined || parts.reading) return;
    parts.reading = true;
    this.context.idle.add(documentId, async () => {
      parts.reading = false;
      const open = this.context.docs.open.get(documentId);
      if (open?.shadow !== shadow) return;
      if (await this.readSlice(documentId, shadow)) this.readStagedLater(documentId, open.shadow ?? shadow);
    });
  }

  /**
   * Reads a slice of the rows staged in `shadow` (the open document's) and warms their lookups: whether
   * some are left. A detached shadow that holds a row it cannot patch is replaced by an attached one.
   */
  private async readSlice(documentId: string, shadow: LoroDoc): Promise<boolean> {
    const open = this.context.docs.open.get(documentId);
    if (open?.shadow !== shadow) return false;
    let read = readStaged(shadow, undefined, await this.storedAhead(documentId, open, shadow));
    let now = shadow;
    if (read === "attach") {
      const attached = attachedShadow(open, shadow, stagedOf(shadow));
      open.shadow = attached;
      if (attached === undefined) return false;
      now = attached;
      read = readStaged(now, undefined, await this.storedAhead(documentId, open, now)) === true;
    }
    // What the push's check will look up for these rows, read into the projection meanwhile.
    await warmStaged(open, now, () => this.context.docs.fill(documentId, open.projection, open.seq)).catch(
      (error: unknown) =>
        this.context.logger.debug("docscript: warming a staged part's lookups failed", { error }),
    );
    return read === true;
  }

  /**
   * The stored rows the next slice patches (ADR 0514), held by the projection first; undefined when
   * they could not be read (the slice reads its rows out of Loro).
   */
  private async storedAhead(
    documentId: string,
    open: OpenDocument,
    shadow: LoroDoc,
  ): Promise<StoredRow | undefined> {
    const ahead = patchesAhead(shadow);
    if (ahead.entities.length + ahead.relations.length === 0) return undefined;
    const projection = open.projection;
    const lacking = () => {
      for (const rowId of ahead.entities) projection.rowJson(rowId);
      for (const rowId of ahead.relations) projection.relationJson(rowId);
      return projection.lacking;
    };
    try {
      for (let fills = 0; fills < patchFills && lacking(); fills++)
        await this.context.docs.fill(documentId, projection, open.seq);
    } catch (error) {
      this.context.logger.debug("docscript: reading a staged slice's stored rows failed", { error });
      return undefined;
    }
    if (lacking()) return undefined;
    return (root, rowId) => (root === ENTITIES ? projection.rowJson(rowId) : projection.relationJson(rowId));
  }
}
