/**
 * The session a turn was said in, as a prior: a conversation's memories split into sessions (a
 * session id, or a pause of more than half an hour between writes), each session scored by BM25 as
 * one document, and every hit lifted by its session's share of the best session's score. A question
 * about a topic finds the session that talks about it, and there the turn that answers it in other
 * words (ADR 0526).
 */
import { bm25Inverse, bm25TermScore } from "../store/sqlite/scope-bm25.ts";
import type { Scored } from "./conversation-retrieval.ts";
import { byScore } from "./rank-memories.ts";
import { type ScopeSnapshot, termPostings } from "./scope-snapshot.ts";

/**
 * A pause longer than this between two memories of one scope written one after the other starts a
 * new session, and so does a step back in time longer than it.
 */
export const sessionPause = 30 * 60_000;

/** How much of the best hit's score the best session's turns gain (chosen on the long dev set). */
export const sessionWeight = 0.3;

interface Sessions {
  /** Per position in the snapshot: its session. */
  readonly of: Int32Array;
  /** Per session: its count of indexed tokens. */
  readonly lengths: readonly number[];
}

const sessionsBySnapshot = new WeakMap<ScopeSnapshot, Sessions>();

/** The snapshot's sessions: runs of one exact scope's memories in write order without a long pause. */
export function sessionsOf(snapshot: ScopeSnapshot): Sessions {
  const known = sessionsBySnapshot.get(snapshot);
  if (known) return known;
  const of = new Int32Array(snapshot.memories.length);
  const lengths: number[] = [];
  const sessionById = new Map<string, number>();
  snapshot.memories.forEach((memory, position) => {
    const place = snapshot.places.get(memory.id);
    const previous = place && place.index > 0 ? place.row[place.index - 1] : undefined;
    // A step back in time is a new session too: old turns imported after live ones are not said then.
    const pause = previous
      ? Math.abs(Date.parse(memory.createdAt) - Date.parse(previous.createdAt))
      : Number.POSITIVE_INFINITY;
    let session = previous ? sessionById.get(previous.id) : undefined;
    if (session === undefined || !(pause <= sessionPause)) {
      session = lengths.length;
      lengths.push(0);
    }
    sessionById.set(memory.id, session);
    of[position] = session;
    lengths[session]! += snapshot.lengths[position]!;
  });
  const sessions = { of, lengths };
  sessionsBySnapshot.set(snapshot, sessions);
  return sessions;
}

/** Each session's BM25 score for the query terms, relative to the best session's (0..1). */
export function sessionScores(snapshot: ScopeSnapshot, terms: readonly string[]): Float64Array {
  const { of, lengths } = sessionsOf(snapshot);
  const scores = new Float64Array(lengths.length);
  if (lengths.length < 2) return scores;
  const averageLength = lengths.reduce((sum, length) => sum + length, 0) / lengths.length;
  for (const term of new Set(terms)) {
    const counts = new Map<number, number>();
    for (const posting of termPostings(snapshot, term) ?? []) {
      posting.positions.forEach((position, index) => {
        const session = of[position]!;
        counts.set(session, (counts.get(session) ?? 0) + posting.counts[index]!);
      });
    }
    const inverse = bm25Inverse(lengths.length, counts.size);
    for (const [session, tf] of counts) {
      scores[session]! += bm25TermScore(inverse, tf, lengths[session]!, averageLength);
    }
  }
  const best = Math.max(0, ...scores);
  if (best > 0) for (let session = 0; session < scores.length; session += 1) scores[session]! /= best;
  return scores;
}

/** The hits, each lifted by `weight` of the best hit's score times its session's relative score. */
export function liftBySession(
  hits: readonly Scored[],
  snapshot: ScopeSnapshot,
  terms: readonly string[],
  weight = sessionWeight,
): Scored[] {
  const top = Math.max(0, ...hits.map((hit) => hit.score));
  if (top === 0) return [...hits];
  const scores = sessionScores(snapshot, terms);
  const { of } = sessionsOf(snapshot);
  const positions = positionsOf(snapshot);
  return hits
    .map((hit) => {
      const position = positions.get(hit.memory.id);
      const lift = position === undefined ? 0 : scores[of[position]!]!;
      return { memory: hit.memory, score: hit.score + weight * top * lift };
    })
    .sort(byScore);
}

const positionsBySnapshot = new WeakMap<ScopeSnapshot, Map<string, number>>();

function positionsOf(snapshot: ScopeSnapshot): Map<string, number> {
  let positions = positionsBySnapshot.get(snapshot);
  if (positions === undefined) {
    positions = new Map(snapshot.memories.map((memory, position) => [memory.id, position]));
    positionsBySnapshot.set(snapshot, positions);
  }
  return positions;
}
