/**
 * The server's side of a run's parts (ADR 0508): each queued as idle work (`IdleWork`), bounded while
 * it waits, imported into the open document's shadow (`stagePart`), its rows read a slice at a time
 * and the push's lookups for them warmed (`readStaged`, `warmStaged`).
 */
import type { Logger } from "@tackle/core";
import type { LoroDoc } from "loro-crdt";
import type { IdleWork } from "./idle-work.ts";
import { describeError } from "./open-document.ts";
import type { OpenDocuments } from "./open-documents.ts";
import { readStaged, type StageAnswer, stagedIdleMs, stagedOf, stagePart, warmStaged } from "./push-stage.ts";

export class PartStager {
  private readonly context: {
    readonly docs: OpenDocuments;
    readonly idle: IdleWork;
    readonly logger: Logger;
  };
  /** Bytes of the parts waiting per document. */
  private readonly partsWaiting = new Map<string, number>();

  constructor(context: { readonly docs: OpenDocuments; readonly idle: IdleWork; readonly logger: Logger }) {
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
    const done = () => {
      const left = (this.partsWaiting.get(documentId) ?? 0) - bytes.byteLength;
      if (left > 0) this.partsWaiting.set(documentId, left);
      else this.partsWaiting.delete(documentId);
    };
    return new Promise((resolve) => {
      const staged = async () => {
        done();
        try {
          resolve(await this.stageNow(documentId, bytes, maxBytes));
        } catch (error) {
          resolve({ staged: false, reason: `the part was not staged: ${describeError(error)}` });
        }
      };
      this.context.idle.add(documentId, staged, () => {
        done();
        resolve({ staged: false, reason: "the server is closing" });
      });
    });
  }

  private async stageNow(documentId: string, bytes: Uint8Array, maxBytes: number): Promise<StageAnswer> {
    const open = this.context.docs.open.get(documentId);
    if (open === undefined) return { staged: false, reason: "the document is not open on this server" };
    // Another run's parts, left by a run that ended without pushing them, give way.
    const left = stagedOf(open.shadow);
    if (left !== undefined && Date.now() - left.lastAt > stagedIdleMs) open.shadow = undefined;
    const shadow = await this.context.docs.shadowOf(documentId, open);
    const { staged, reason, dropShadow } = stagePart(open, shadow, bytes, maxBytes);
    if (dropShadow === true) open.shadow = undefined;
    if (staged) this.readStagedLater(documentId, shadow);
    return reason === undefined ? { staged } : { staged, reason };
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
      const more = readStaged(shadow);
      // What the push's check will look up for these rows, read into the projection meanwhile.
      await warmStaged(open, shadow, () =>
        this.context.docs.fill(documentId, open.projection, open.seq),
      ).catch((error: unknown) =>
        this.context.logger.debug("docscript: warming a staged part's lookups failed", { error }),
      );
      if (more) this.readStagedLater(documentId, shadow);
    });
  }
}
