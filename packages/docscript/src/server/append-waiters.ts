/**
 * Who waits for a document's next append (a client pulling with `waitMs`), woken by a push through
 * this server or, on a store that announces appends (PostgreSQL), through any other.
 */
import type { Logger } from "@tackle/core";
import type { DocumentStore } from "./document-store.ts";
import { describeError } from "./open-document.ts";

export class AppendWaiters {
  private readonly waiters = new Map<string, Set<() => void>>();
  private watching: Promise<void> | undefined;
  private readonly store: DocumentStore;
  private readonly logger: Logger;

  constructor(store: DocumentStore, logger: Logger) {
    this.store = store;
    this.logger = logger;
  }

  /** Resolves on the next append to the document (through this server or an announcing store). */
  next(documentId: string): { appended: Promise<void>; cancel: () => void } {
    let wake: () => void = () => {};
    const appended = new Promise<void>((resolve) => {
      wake = resolve;
    });
    let waiting = this.waiters.get(documentId);
    if (waiting === undefined) {
      waiting = new Set();
      this.waiters.set(documentId, waiting);
    }
    waiting.add(wake);
    return {
      appended,
      cancel: () => {
        const set = this.waiters.get(documentId);
        set?.delete(wake);
        if (set?.size === 0) this.waiters.delete(documentId);
      },
    };
  }

  wake(documentId: string): void {
    for (const wake of this.waiters.get(documentId) ?? []) wake();
  }

  /** Starts listening to the store's append announcements once (a failure is logged and retried on next need). */
  async watch(): Promise<void> {
    if (this.store.watchAppends === undefined) return;
    this.watching ??= this.store
      .watchAppends(
        (documentId) => this.wake(documentId),
        // Listening again after a lost connection: any document may have had an unannounced append.
        () => {
          for (const documentId of [...this.waiters.keys()]) this.wake(documentId);
        },
      )
      .then(
        () => undefined,
        (error: unknown) => {
          this.logger.warn("docscript: cannot listen for other servers' pushes", {
            error: describeError(error),
          });
          this.watching = undefined;
        },
      );
    await this.watching;
  }
}
