/** What the middlewares inject: the items of a context bundle, each with where it came from. */

/** One retrieved item with its provenance, so the model can weigh it and a human can trace it. */
export interface MemoryContextItem {
  /** The stored id (memory, event or document chunk). */
  readonly id: string;
  readonly content: string;
  /** `memory`, `event`, `document`, `profile`, … */
  readonly type: string;
  /** The memory's kind (`fact`, `preference`, `procedure`, …) when it has one. */
  readonly kind?: string;
  /** Where the text came from: a session, a document title, an import. */
  readonly source?: string;
  /** ISO-8601 time the item was stored. */
  readonly createdAt?: string;
  readonly score?: number;
}

export interface MemoryContextBundle {
  readonly items: readonly MemoryContextItem[];
}
