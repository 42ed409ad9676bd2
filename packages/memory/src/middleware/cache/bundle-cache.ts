/**
 * `createBundleCache`: a bounded, short-lived LRU of in-flight and settled context-bundle fetches,
 * enough to dedupe within one warm process; it is not shared across processes.
 */
export const DEFAULT_CACHE_ENTRIES = 50;
export const DEFAULT_CACHE_TTL_MS = 60_000;

export interface BundleCacheOptions {
  /** How many identities are remembered; the least recently used is forgotten first. Default 50. */
  readonly maxEntries?: number;
  /** How long a fetched bundle is served, counted from the fetch (a hit does not extend it). Default 60 s. */
  readonly ttlMs?: number;
  /** The clock in milliseconds (default `performance.now`); tests pass their own instead of sleeping. */
  readonly now?: () => number;
}

export interface BundleCache<Value> {
  /** The live entry for `key`, refreshed as most recently used; undefined when absent or expired. */
  get(key: string): Promise<Value> | undefined;
  /** Stores a fetch; a fetch that fails is forgotten so the next call tries again. */
  set(key: string, value: Promise<Value>, owner?: unknown): void;
  /** Forgets every entry whose owner (given to `set`) `matches`. */
  forget(matches: (owner: unknown) => boolean): void;
  readonly size: number;
}

export function createBundleCache<Value>(options: BundleCacheOptions = {}): BundleCache<Value> {
  const maxEntries = options.maxEntries ?? DEFAULT_CACHE_ENTRIES;
  const ttlMs = options.ttlMs ?? DEFAULT_CACHE_TTL_MS;
  const now = options.now ?? (() => performance.now());
  // A Map iterates in insertion order: re-inserting on use keeps the least recently used first.
  const entries = new Map<string, { value: Promise<Value>; expiresAt: number; owner: unknown }>();
  return {
    get(key) {
      const entry = entries.get(key);
      if (entry === undefined) return undefined;
      entries.delete(key);
      if (entry.expiresAt <= now()) return undefined;
      entries.set(key, entry);
      return entry.value;
    },
    set(key, value, owner) {
      entries.delete(key);
      entries.set(key, { value, expiresAt: now() + ttlMs, owner });
      while (entries.size > maxEntries) entries.delete(entries.keys().next().value!);
      value.catch(() => {
        if (entries.get(key)?.value === value) entries.delete(key);
      });
    },
    forget(matches) {
      for (const [key, entry] of entries) if (matches(entry.owner)) entries.delete(key);
    },
    get size() {
      return entries.size;
    },
  };
}
