/**
 * What `createResultPages` keeps of cut answers for paging: in memory, bounded by entries and bytes
 * (the least recently read goes first) and by time since last read.
 */
import type { Position, ResultItem, TextScans } from "./result-items.ts";

export interface KeptEntry {
  readonly owner: string;
  readonly items: readonly ResultItem[];
  readonly bytes: number;
  readonly totals: Totals;
  /** Where each part starts: the cursor `id.n` reads part `n + 1` (`id.0` the first part again). */
  readonly starts: Position[];
  /** What the cuts of its text learnt: a page's cut reads about the page, not the text before it (ADR 0558). */
  readonly scans: TextScans;
  /** The tokens of the first part, which may hold back room for an error beside it. */
  readonly firstLimit: number;
  lastRead: number;
}

export interface Totals {
  readonly items: number;
  readonly characters: number;
  readonly tokens: number;
  /** The tokens are estimated from the density of its first 100,000 characters: too long to count. */
  readonly estimated: boolean;
}

export interface KeptResults {
  readonly maxBytes: number;
  readonly ttlMs: number;
  get(id: string): KeptEntry | undefined;
  /** Marks `entry` read now: it becomes the most recently read. */
  read(id: string, entry: KeptEntry, now: number): void;
  /** Keeps `entry` (dropping the least recently read to make room); false when it alone is too large. */
  keep(id: string, entry: KeptEntry): boolean;
  /** Drops what was not read for `ttlMs`. */
  sweep(now: number): void;
  /** Drops what `owner` kept. */
  forget(owner: string): void;
  kept(): { readonly entries: number; readonly bytes: number };
}

export function createKeptResults(limits: {
  readonly maxEntries: number;
  readonly maxBytes: number;
  readonly ttlMs: number;
}): KeptResults {
  const { maxEntries, maxBytes, ttlMs } = limits;
  const entries = new Map<string, KeptEntry>();
  let keptBytes = 0;

  function drop(id: string): void {
    const entry = entries.get(id);
    if (entry === undefined) return;
    entries.delete(id);
    keptBytes -= entry.bytes;
  }

  return {
    maxBytes,
    ttlMs,
    get: (id) => entries.get(id),
    read(id, entry, now) {
      entry.lastRead = now;
      entries.delete(id);
      entries.set(id, entry);
    },
    keep(id, entry) {
      if (entry.bytes > maxBytes) return false;
      while (entries.size > 0 && (entries.size >= maxEntries || keptBytes + entry.bytes > maxBytes)) {
        drop(entries.keys().next().value as string);
      }
      entries.set(id, entry);
      keptBytes += entry.bytes;
      return true;
    },
    sweep(now) {
      for (const [id, entry] of entries) if (now - entry.lastRead >= ttlMs) drop(id);
    },
    forget(owner) {
      for (const [id, entry] of entries) if (entry.owner === owner) drop(id);
    },
    kept: () => ({ entries: entries.size, bytes: keptBytes }),
  };
}
