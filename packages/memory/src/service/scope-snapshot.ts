/**
 * A scope's active memories kept in process (ADR 0369): a search then reads the tenant's change
 * stamp and the scope's rows changed since the stamp its snapshot holds — none, while nothing
 * changed — instead of its candidates' text, the scope's size and the neighbouring turns, and ranks
 * in memory with the same BM25 over the scope's own statistics the SQLite store computes
 * (scope-bm25.ts). A write changes the snapshot in time proportional to the write (ADR 0541); a
 * memory deleted or moved out (a purge) makes the next search read the scope again. Bounded: scopes
 * past `maximumScope` memories are searched by the store as before, and the cache holds at most
 * `maximumCached` memories in all (a scope past the bound counts as one).
 */
import { type MemoryScope, scopeKey } from "../scope/memory-scope.ts";
import type { MemoryStore } from "../store/memory-store.ts";
import { applyChanges, type ScopeSnapshot, snapshotOf } from "./snapshot-index.ts";

export type { ScopeSnapshot } from "./snapshot-index.ts";
export { searchSnapshot, snapshotMemories, snapshotNeighbours } from "./snapshot-index.ts";

interface Entry {
  /** The tenant's change stamp the entry is current to (or, from a store without stamps, its generation). */
  stamp: number | string;
  /** Undefined: the scope is past `maximumScope` (the store searches it). */
  snapshot: ScopeSnapshot | undefined;
  /** What the entry counts against `maximumCached`: its memories, or 1 for a scope past the bound. */
  size: number;
}

export interface ScopeSnapshotOptions {
  /** Scopes with more active memories than this are searched by the store (default 25,000). */
  readonly maximumScope?: number;
  /** Memories held in all (default 50,000): the least recently searched scopes go first. */
  readonly maximumCached?: number;
}

export type ScopeSnapshots = ReturnType<typeof createScopeSnapshots>;

/** Catching up with more changed rows than this reads the scope again instead. */
const changesRead = 2_000;

/** Two searches of one scope catching up at once: the later one reads the changes again, this often at most. */
const catchUpAttempts = 3;

export function createScopeSnapshots(store: MemoryStore, options: ScopeSnapshotOptions = {}) {
  const maximumScope = options.maximumScope ?? 25_000;
  const maximumCached = options.maximumCached ?? 50_000;
  const entries = new Map<string, Entry>();
  let cached = 0;

  /** Sets the key's entry (most recently used last) and evicts the least recently used past the bound. */
  function remember(key: string, entry: Entry, size: number): void {
    const previous = entries.get(key);
    if (previous) {
      cached -= previous.size;
      entries.delete(key);
    }
    entry.size = size;
    entries.set(key, entry);
    cached += size;
    for (const [oldest, old] of entries) {
      if (cached <= maximumCached || oldest === key) break;
      entries.delete(oldest);
      cached -= old.size;
    }
  }

  function keep(key: string, stamp: number | string, snapshot: ScopeSnapshot | undefined) {
    remember(key, { stamp, snapshot, size: 0 }, snapshot?.live ?? 1);
    return snapshot;
  }

  /** The scope read whole: its active memories, or undefined past the bound. */
  async function load(tenantId: string, scope: MemoryScope, key: string) {
    const changes = store.memoryChanges!;
    const { stamp, rows } = await changes(tenantId, scope, { limit: maximumScope + 1 });
    return keep(key, stamp, rows.length > maximumScope ? undefined : snapshotOf(rows));
  }

  /** A store without change stamps: the scope read whole whenever the tenant's generation moved. */
  async function reload(tenantId: string, scope: MemoryScope, key: string) {
    const generation = await store.memoryGeneration!(tenantId);
    const known = entries.get(key);
    if (known?.stamp === generation) {
      remember(key, known, known.size);
      return known.snapshot;
    }
    const newestFirst = await store.listMemories(tenantId, scope, {
      statuses: ["active"],
      order: "written",
      limit: maximumScope + 1,
    });
    if (newestFirst.length > maximumScope) return keep(key, generation, undefined);
    const count = newestFirst.length;
    return keep(
      key,
      generation,
      snapshotOf(newestFirst.map((memory, index) => ({ seq: count - index, memory }))),
    );
  }

  /** The known entry brought up to the tenant's stamp; false when another search changed it meanwhile. */
  async function catchUp(tenantId: string, scope: MemoryScope, key: string, known: Entry) {
    const since = known.stamp as number;
    const changes = await store.memoryChanges!(tenantId, scope, {
      since,
      limit: known.snapshot === undefined ? 0 : changesRead,
    });
    if (entries.get(key) !== known || known.stamp !== since) return false;
    if (changes.stamp === since) {
      remember(key, known, known.size);
      return known.snapshot;
    }
    if (known.snapshot === undefined) {
      // Past the bound: counted again, not listed, unless it shrank below it.
      const { active } = await store.countMemories(tenantId, scope);
      if (active > maximumScope) return keep(key, changes.stamp, undefined);
      return load(tenantId, scope, key);
    }
    // Behind (a file restored, a stamp never committed), something left, or too much changed.
    if (changes.stamp < since || changes.removed > since || changes.rows.length >= changesRead) {
      return load(tenantId, scope, key);
    }
    const snapshot = applyChanges(known.snapshot, changes.rows);
    if (snapshot.live > maximumScope) return keep(key, changes.stamp, undefined);
    return keep(key, changes.stamp, snapshot);
  }

  return {
    /** The scope's snapshot, current to the tenant's latest change; undefined past the bound. */
    async get(tenantId: string, scope: MemoryScope): Promise<ScopeSnapshot | undefined> {
      const key = `${tenantId}\u0000${scopeKey(scope)}`;
      if (store.memoryChanges === undefined) {
        return store.memoryGeneration === undefined ? undefined : reload(tenantId, scope, key);
      }
      for (let attempt = 0; attempt < catchUpAttempts; attempt += 1) {
        const known = entries.get(key);
        if (known === undefined) return load(tenantId, scope, key);
        const caught = await catchUp(tenantId, scope, key, known);
        if (caught !== false) return caught;
      }
      // Other searches of the scope kept changing it: the store answers this one.
      return undefined;
    },
  };
}
