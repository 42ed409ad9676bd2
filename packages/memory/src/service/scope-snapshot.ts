/**
 * A scope's active memories kept in process while the tenant's memory generation holds (ADR 0369):
 * a search then reads one small row (the generation) instead of its candidates' text, the scope's
 * size and the neighbouring turns, and ranks in memory with the same BM25 over the scope's own
 * statistics the SQLite store computes (scope-bm25.ts). Bounded: scopes past `maximumScope` memories
 * are searched by the store as before, and the cache holds at most `maximumCached` memories in all
 * (a scope past the bound counts as one).
 */
import type { MemoryKind } from "../schemas/memory.ts";
import { type MemoryScope, scopeKey } from "../scope/memory-scope.ts";
import { bm25Inverse, bm25TermScore } from "../store/bm25.ts";
import type { MemoryStore, StoredMemory } from "../store/memory-store.ts";
import { indexTokens, termMatch } from "../text/index-tokens.ts";

export interface ScopeSnapshot {
  /** Active memories of the scope, in write order. */
  readonly memories: readonly StoredMemory[];
  /** Each memory's count of indexed tokens (as the SQLite index sees them; at least 1). */
  readonly lengths: readonly number[];
  /** Per indexed token: the positions in `memories` holding it, and how often each does. */
  readonly postings: ReadonlyMap<string, { readonly positions: number[]; readonly counts: number[] }>;
  /** Per memory id: its exact scope's memories (write order) and its place among them. */
  readonly places: ReadonlyMap<string, { readonly row: readonly StoredMemory[]; readonly index: number }>;
}

interface Entry {
  readonly generation: number | string;
  /** Undefined: the scope is past `maximumScope` (the store searches it). */
  readonly snapshot: ScopeSnapshot | undefined;
  /** What the entry counts against `maximumCached`: its memories, or 1 for a scope past the bound. */
  readonly size: number;
}

export interface ScopeSnapshotOptions {
  /** Scopes with more active memories than this are searched by the store (default 5,000). */
  readonly maximumScope?: number;
  /** Memories held in all (default 50,000): the least recently searched scopes go first. */
  readonly maximumCached?: number;
}

export type ScopeSnapshots = ReturnType<typeof createScopeSnapshots>;

export function createScopeSnapshots(store: MemoryStore, options: ScopeSnapshotOptions = {}) {
  const maximumScope = options.maximumScope ?? 5_000;
  const maximumCached = options.maximumCached ?? 50_000;
  const entries = new Map<string, Entry>();
  let cached = 0;

  function remember(key: string, entry: Entry) {
    const previous = entries.get(key);
    if (previous) {
      cached -= previous.size;
      entries.delete(key);
    }
    entries.set(key, entry);
    cached += entry.size;
    for (const [oldest, old] of entries) {
      if (cached <= maximumCached || oldest === key) break;
      entries.delete(oldest);
      cached -= old.size;
    }
  }

  function pastTheBound(key: string, generation: number | string): undefined {
    remember(key, { generation, snapshot: undefined, size: 1 });
    return undefined;
  }

  return {
    /** The scope's snapshot, loaded anew when the tenant's memories changed; undefined past the bound. */
    async get(tenantId: string, scope: MemoryScope): Promise<ScopeSnapshot | undefined> {
      if (store.memoryGeneration === undefined) return undefined;
      // Read before the rows: a write landing in between makes the next search load again.
      const generation = await store.memoryGeneration(tenantId);
      const key = `${tenantId}\u0000${scopeKey(scope)}`;
      const known = entries.get(key);
      if (known && known.generation === generation) {
        // Most recently used last.
        entries.delete(key);
        entries.set(key, known);
        return known.snapshot;
      }
      // A scope found past the bound is counted again, not listed: after every write in the tenant
      // it would otherwise decode its first `maximumScope + 1` memories only to search the store.
      if (known !== undefined && known.snapshot === undefined) {
        const { active } = await store.countMemories(tenantId, scope);
        if (active > maximumScope) return pastTheBound(key, generation);
      }
      const newestFirst = await store.listMemories(tenantId, scope, {
        statuses: ["active"],
        order: "written",
        limit: maximumScope + 1,
      });
      if (newestFirst.length > maximumScope) return pastTheBound(key, generation);
      const snapshot = snapshotOf(newestFirst.reverse());
      remember(key, { generation, snapshot, size: snapshot.memories.length });
      return snapshot;
    },
  };
}

/** A snapshot of memories given in write order. */
function snapshotOf(memories: StoredMemory[]): ScopeSnapshot {
  const postings = new Map<string, { positions: number[]; counts: number[] }>();
  const lengths = memories.map((memory, position) => {
    const tokens = indexTokens(memory.content);
    for (const token of tokens) {
      let posting = postings.get(token);
      if (posting === undefined) {
        posting = { positions: [], counts: [] };
        postings.set(token, posting);
      }
      if (posting.positions.at(-1) === position) posting.counts[posting.counts.length - 1]! += 1;
      else {
        posting.positions.push(position);
        posting.counts.push(1);
      }
    }
    return Math.max(tokens.length, 1);
  });
  const rows = new Map<string, StoredMemory[]>();
  const places = new Map<string, { row: readonly StoredMemory[]; index: number }>();
  for (const memory of memories) {
    const key = scopeKey(memory);
    let row = rows.get(key);
    if (row === undefined) {
      row = [];
      rows.set(key, row);
    }
    places.set(memory.id, { row, index: row.length });
    row.push(memory);
  }
  return { memories, lengths, postings, places };
}

type Posting = { readonly positions: number[]; readonly counts: number[] };

/**
 * The postings a query term matches: its stemmed word's, or (`teach*`) every token's that starts with
 * either form; undefined for a term with no word in it.
 */
function termPostings(snapshot: ScopeSnapshot, term: string): Posting[] | undefined {
  const match = termMatch(term);
  if (match === undefined) return undefined;
  if (!match.prefix) {
    const posting = snapshot.postings.get(match.stemmed);
    return posting === undefined ? [] : [posting];
  }
  const postings: Posting[] = [];
  for (const [token, posting] of snapshot.postings) {
    if (token.startsWith(match.word) || token.startsWith(match.stemmed)) postings.push(posting);
  }
  return postings;
}

/**
 * What `store.searchMemories` answers, from the snapshot's postings: BM25 over the scope's own
 * statistics exactly as `scoreWithScopeStatistics` computes it (every memory holding a term is a
 * candidate; N counts the kinds asked for; the average length is the candidates'; ties go to the
 * later memory).
 */
export function searchSnapshot(
  snapshot: ScopeSnapshot,
  terms: readonly string[],
  options: { readonly limit: number; readonly kinds?: readonly MemoryKind[] },
): { memory: StoredMemory; score: number }[] {
  const kinds = options.kinds ? new Set(options.kinds) : undefined;
  const admitted = (position: number) => !kinds || kinds.has(snapshot.memories[position]!.kind);
  // Per distinct term: each admitted memory's count of tokens the term matches.
  const frequencies: Map<number, number>[] = [];
  for (const term of new Set(terms)) {
    const postings = termPostings(snapshot, term);
    if (postings === undefined) continue;
    const counts = new Map<number, number>();
    for (const posting of postings) {
      posting.positions.forEach((position, index) => {
        if (admitted(position)) counts.set(position, (counts.get(position) ?? 0) + posting.counts[index]!);
      });
    }
    frequencies.push(counts);
  }
  if (frequencies.length === 0) return [];
  let documents = 0;
  for (let position = 0; position < snapshot.memories.length; position += 1)
    if (admitted(position)) documents += 1;
  // Newest first, the order the store sums in.
  const candidates = [...new Set(frequencies.flatMap((counts) => [...counts.keys()]))].sort(
    (left, right) => right - left,
  );
  if (candidates.length === 0) return [];
  const averageLength =
    candidates.reduce((sum, position) => sum + snapshot.lengths[position]!, 0) / candidates.length;
  const inverse = frequencies.map((counts) => bm25Inverse(Math.max(documents, counts.size), counts.size));
  const scored = candidates.map((position) => {
    const length = snapshot.lengths[position]!;
    let score = 0;
    frequencies.forEach((counts, index) => {
      const tf = counts.get(position) ?? 0;
      if (tf > 0) score += bm25TermScore(inverse[index]!, tf, length, averageLength);
    });
    return { position, score };
  });
  return scored
    .filter((entry) => entry.score > 0)
    .sort((left, right) => right.score - left.score || right.position - left.position)
    .slice(0, options.limit)
    .map(({ position, score }) => ({ memory: snapshot.memories[position]!, score }));
}

/** What `store.neighbourMemories` answers, from the snapshot: the nearest memories of each id's exact scope. */
export function snapshotNeighbours(
  snapshot: ScopeSnapshot,
  ids: readonly string[],
  window: number,
): Map<string, { memory: StoredMemory; offset: number }[]> {
  const found = new Map<string, { memory: StoredMemory; offset: number }[]>();
  for (const id of ids) {
    const place = snapshot.places.get(id);
    if (place === undefined) continue;
    const around: { memory: StoredMemory; offset: number }[] = [];
    for (let offset = -window; offset <= window; offset += 1) {
      const memory = offset === 0 ? undefined : place.row[place.index + offset];
      if (memory) around.push({ memory, offset });
    }
    found.set(id, around);
  }
  return found;
}
