/**
 * A scope's active memories indexed in process (ADR 0369) and changed in place as its rows change
 * (ADR 0541): token postings, lengths and each memory's place among its exact scope's turns, kept
 * per slot. A memory added takes a new slot; one that leaves frees its slot (slots are compacted when
 * half are free). Write order is each memory's sequence number in the store, not its slot, so a row
 * committed late (PostgreSQL draws sequence numbers before the tenant's lock) or made active again
 * lands in its place: what the snapshot answers equals what a snapshot read anew answers.
 */
import type { MemoryKind } from "../schemas/memory.ts";
import { scopeKey } from "../scope/memory-scope.ts";
import { bm25Inverse, bm25TermScore } from "../store/bm25.ts";
import type { StoredMemory } from "../store/memory-store.ts";
import { indexTokens, termMatch } from "../text/index-tokens.ts";

type Posting = { readonly positions: number[]; readonly counts: number[] };

export interface ScopeSnapshot {
  /** Per slot: an active memory of the scope, or undefined once it left. */
  readonly memories: (StoredMemory | undefined)[];
  /** Per slot: the memory's place in write order (the store's sequence number). */
  readonly seqs: number[];
  /** Per slot: the memory's count of indexed tokens (as the SQLite index sees them; at least 1). */
  readonly lengths: number[];
  /** Per indexed token: the slots holding it, and how often each does. */
  readonly postings: Map<string, Posting>;
  /** Per memory id: its slot. */
  readonly slots: Map<string, number>;
  /** Per exact scope: its memories' slots in write order. */
  readonly rows: Map<string, number[]>;
  /** Active memories held. */
  live: number;
  /** The active memories in write order, made when asked and dropped by the next change. */
  ordered: StoredMemory[] | undefined;
}

/** A snapshot of the given memories, each with its sequence number. */
export function snapshotOf(
  rows: Iterable<{ readonly seq: number; readonly memory: StoredMemory }>,
): ScopeSnapshot {
  const snapshot: ScopeSnapshot = {
    memories: [],
    seqs: [],
    lengths: [],
    postings: new Map(),
    slots: new Map(),
    rows: new Map(),
    live: 0,
    ordered: undefined,
  };
  for (const { seq, memory } of [...rows].sort((left, right) => left.seq - right.seq)) {
    addMemory(snapshot, seq, memory);
  }
  return snapshot;
}

/**
 * Applies rows as they now stand (any status): each replaces what the snapshot held under its id,
 * and stays only if active. Applying a row twice leaves the snapshot as applying it once.
 */
export function applyChanges(
  snapshot: ScopeSnapshot,
  rows: readonly { readonly seq: number; readonly memory: StoredMemory }[],
): ScopeSnapshot {
  for (const { seq, memory } of rows) {
    removeMemory(snapshot, memory.id);
    if (memory.status === "active") addMemory(snapshot, seq, memory);
  }
  // Many slots freed (edits and supersessions free one each): index the ones held anew.
  if (snapshot.memories.length > 64 && snapshot.memories.length > 2 * snapshot.live) {
    return snapshotOf(heldRows(snapshot));
  }
  return snapshot;
}

function heldRows(snapshot: ScopeSnapshot): { seq: number; memory: StoredMemory }[] {
  return snapshot.memories.flatMap((memory, slot) =>
    memory === undefined ? [] : [{ seq: snapshot.seqs[slot]!, memory }],
  );
}

/** The snapshot's active memories in write order. */
export function snapshotMemories(snapshot: ScopeSnapshot): readonly StoredMemory[] {
  snapshot.ordered ??= heldRows(snapshot)
    .sort((left, right) => left.seq - right.seq)
    .map((row) => row.memory);
  return snapshot.ordered;
}

function addMemory(snapshot: ScopeSnapshot, seq: number, memory: StoredMemory): void {
  const slot = snapshot.memories.length;
  const tokens = indexTokens(memory.content);
  const counts = new Map<string, number>();
  for (const token of tokens) counts.set(token, (counts.get(token) ?? 0) + 1);
  for (const [token, count] of counts) {
    let posting = snapshot.postings.get(token);
    if (posting === undefined) {
      posting = { positions: [], counts: [] };
      snapshot.postings.set(token, posting);
    }
    posting.positions.push(slot);
    posting.counts.push(count);
  }
  snapshot.memories.push(memory);
  snapshot.seqs.push(seq);
  snapshot.lengths.push(Math.max(tokens.length, 1));
  snapshot.slots.set(memory.id, slot);
  const key = scopeKey(memory);
  let row = snapshot.rows.get(key);
  if (row === undefined) {
    row = [];
    snapshot.rows.set(key, row);
  }
  const last = row.at(-1);
  if (last === undefined || snapshot.seqs[last]! < seq) row.push(slot);
  else row.splice(placeIn(snapshot, row, seq), 0, slot);
  snapshot.live += 1;
  snapshot.ordered = undefined;
}

function removeMemory(snapshot: ScopeSnapshot, id: string): void {
  const slot = snapshot.slots.get(id);
  if (slot === undefined) return;
  const memory = snapshot.memories[slot]!;
  for (const token of new Set(indexTokens(memory.content))) {
    const posting = snapshot.postings.get(token)!;
    const index = posting.positions.lastIndexOf(slot);
    posting.positions.splice(index, 1);
    posting.counts.splice(index, 1);
    if (posting.positions.length === 0) snapshot.postings.delete(token);
  }
  const key = scopeKey(memory);
  const row = snapshot.rows.get(key)!;
  row.splice(placeIn(snapshot, row, snapshot.seqs[slot]!), 1);
  if (row.length === 0) snapshot.rows.delete(key);
  snapshot.memories[slot] = undefined;
  snapshot.slots.delete(id);
  snapshot.live -= 1;
  snapshot.ordered = undefined;
}

/** The first index in `row` (slots in write order) whose sequence number is not below `seq`. */
function placeIn(snapshot: ScopeSnapshot, row: readonly number[], seq: number): number {
  let low = 0;
  let high = row.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (snapshot.seqs[row[middle]!]! < seq) low = middle + 1;
    else high = middle;
  }
  return low;
}

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
  const admitted = (slot: number) => {
    const memory = snapshot.memories[slot];
    return memory !== undefined && (!kinds || kinds.has(memory.kind));
  };
  // Per distinct term: each admitted memory's count of tokens the term matches.
  const frequencies: Map<number, number>[] = [];
  for (const term of new Set(terms)) {
    const postings = termPostings(snapshot, term);
    if (postings === undefined) continue;
    const counts = new Map<number, number>();
    for (const posting of postings) {
      posting.positions.forEach((slot, index) => {
        if (admitted(slot)) counts.set(slot, (counts.get(slot) ?? 0) + posting.counts[index]!);
      });
    }
    frequencies.push(counts);
  }
  if (frequencies.length === 0) return [];
  let documents = snapshot.live;
  if (kinds) {
    documents = 0;
    for (let slot = 0; slot < snapshot.memories.length; slot += 1) if (admitted(slot)) documents += 1;
  }
  const { seqs } = snapshot;
  // Newest first, the order the store sums in.
  const candidates = [...new Set(frequencies.flatMap((counts) => [...counts.keys()]))].sort(
    (left, right) => seqs[right]! - seqs[left]!,
  );
  if (candidates.length === 0) return [];
  const averageLength =
    candidates.reduce((sum, slot) => sum + snapshot.lengths[slot]!, 0) / candidates.length;
  const inverse = frequencies.map((counts) => bm25Inverse(Math.max(documents, counts.size), counts.size));
  const scored = candidates.map((slot) => {
    const length = snapshot.lengths[slot]!;
    let score = 0;
    frequencies.forEach((counts, index) => {
      const tf = counts.get(slot) ?? 0;
      if (tf > 0) score += bm25TermScore(inverse[index]!, tf, length, averageLength);
    });
    return { slot, score };
  });
  return scored
    .filter((entry) => entry.score > 0)
    .sort((left, right) => right.score - left.score || seqs[right.slot]! - seqs[left.slot]!)
    .slice(0, options.limit)
    .map(({ slot, score }) => ({ memory: snapshot.memories[slot]!, score }));
}

/** What `store.neighbourMemories` answers, from the snapshot: the nearest memories of each id's exact scope. */
export function snapshotNeighbours(
  snapshot: ScopeSnapshot,
  ids: readonly string[],
  window: number,
): Map<string, { memory: StoredMemory; offset: number }[]> {
  const found = new Map<string, { memory: StoredMemory; offset: number }[]>();
  for (const id of ids) {
    const slot = snapshot.slots.get(id);
    if (slot === undefined) continue;
    const row = snapshot.rows.get(scopeKey(snapshot.memories[slot]!))!;
    const index = placeIn(snapshot, row, snapshot.seqs[slot]!);
    const around: { memory: StoredMemory; offset: number }[] = [];
    for (let offset = -window; offset <= window; offset += 1) {
      const neighbour = offset === 0 ? undefined : row[index + offset];
      if (neighbour !== undefined) around.push({ memory: snapshot.memories[neighbour]!, offset });
    }
    found.set(id, around);
  }
  return found;
}
