/**
 * Work a document does while nothing else is asked of it (ADR 0508): queued apart from its calls and
 * run one item at a time, each in the document's turn, only when no call is queued. A call that comes
 * meanwhile waits for at most the item running; a push drains the items first (they are its own parts).
 */
export interface DocumentTurns {
  /** Whether calls on the document are queued or running. */
  busy(documentId: string): Promise<unknown> | undefined;
  /** Runs `work` in the document's turn, after every call queued before it. */
  inTurn(documentId: string, work: () => Promise<void>): Promise<void>;
}

interface Item {
  readonly run: () => Promise<void>;
  /** Called instead of `run` when the item is dropped (the host closing). */
  readonly dropped: () => void;
}

/** How long idle work waits after the document's last call before it goes on. */
export const quietAfterCallMs = 5;

export class IdleWork {
  private readonly items = new Map<string, Item[]>();
  private readonly kicked = new Set<string>();
  private readonly turns: DocumentTurns;

  constructor(turns: DocumentTurns) {
    this.turns = turns;
  }

  /** Queues `run` for when the document is idle. */
  add(documentId: string, run: () => Promise<void>, dropped: () => void = () => {}): void {
    const items = this.items.get(documentId) ?? [];
    items.push({ run, dropped });
    this.items.set(documentId, items);
    this.kick(documentId);
  }

  /** Runs every item queued for the document now, in order (the caller holds the document's turn). */
  async drain(documentId: string): Promise<void> {
    for (let item = this.take(documentId); item !== undefined; item = this.take(documentId)) await item.run();
  }

  /** Drops every item (each told so). */
  clear(): void {
    for (const items of this.items.values()) for (const item of items) item.dropped();
    this.items.clear();
  }

  private take(documentId: string): Item | undefined {
    const items = this.items.get(documentId);
    const item = items?.shift();
    if (items?.length === 0) this.items.delete(documentId);
    return item;
  }

  /**
   * Runs the next item once the document's calls are done (`quietAfterCallMs` after the last), a
   * macrotask after the item before, so requests already received queue their calls first.
   */
  private kick(documentId: string): void {
    if (this.kicked.has(documentId)) return;
    this.kicked.add(documentId);
    setImmediate(() => {
      this.kicked.delete(documentId);
      if (!this.items.has(documentId)) return;
      const busy = this.turns.busy(documentId);
      if (busy !== undefined) {
        // A caller that just had its answer usually asks again at once (a run's next lookup): it goes first.
        void busy.then(() => setTimeout(() => this.kick(documentId), quietAfterCallMs));
        return;
      }
      const item = this.take(documentId);
      if (item === undefined) return;
      void this.turns
        .inTurn(documentId, item.run)
        .catch(() => {
          // An item answers its own failures; the next one runs regardless.
        })
        .finally(() => this.kick(documentId));
    });
  }
}
