/**
 * Retrieval built for conversations, on top of the store's BM25 (no model in the loop):
 *   - time-aware: "in May 2023", "last May", "last week" become a window; memories stored inside it
 *     are lifted, and the candidate pool widens so that a turn matching only the window is there;
 *   - speaker-aware: a memory whose `metadata.speaker` is named in the question is lifted;
 *   - multi-hop: names found in the first hits and absent from the question seed a second pass
 *     ("Maya's sister" → "Lena" → "Lena played her violin");
 *   - neighbouring turns: a turn next to a hit (same session, or both with a speaker) shares its
 *     score, so the reply that answers a question is found through the question before it; the turn
 *     right after a hit that asks something ("Did you pick a name yet?") gets twice the share;
 *   - diversified: a near-copy of a better-ranked result is pushed down.
 */
import type { StoredMemory } from "../store/memory-store.ts";
import { byScore } from "./rank-memories.ts";
import { textSimilarity } from "./text.ts";

const monthNames = [
  "january",
  "february",
  "march",
  "april",
  "may",
  "june",
  "july",
  "august",
  "september",
  "october",
  "november",
  "december",
];

export interface TimeWindow {
  readonly from: number;
  readonly to: number;
}

/** The time a question points at, if it names one. */
export function timeWindow(query: string, now: Date): TimeWindow | undefined {
  const text = query.toLowerCase();
  const day = 86_400_000;
  const month = text.match(
    /\b(?:(last|this)\s+)?(january|february|march|april|may|june|july|august|september|october|november|december)(?:\s+(?:of\s+)?(\d{4}))?\b/,
  );
  // "may" is also a verb: only as a month with a year, "last"/"this", or "in May".
  if (month && (month[1] || month[3] || new RegExp(`\\bin\\s+${month[2]}\\b`).test(text))) {
    const index = monthNames.indexOf(month[2]!);
    let year = month[3] ? Number(month[3]) : now.getUTCFullYear();
    if (!month[3] && Date.UTC(year, index, 1) > now.getTime()) year -= 1;
    return { from: Date.UTC(year, index, 1), to: Date.UTC(year, index + 1, 1) };
  }
  const year = text.match(/\bin\s+(\d{4})\b/);
  if (year) return { from: Date.UTC(Number(year[1]), 0, 1), to: Date.UTC(Number(year[1]) + 1, 0, 1) };
  const at = now.getTime();
  if (/\byesterday\b/.test(text)) return { from: at - 2 * day, to: at };
  if (/\blast\s+week\b/.test(text)) return { from: at - 14 * day, to: at };
  if (/\blast\s+month\b/.test(text)) return { from: at - 62 * day, to: at };
  if (/\blast\s+year\b/.test(text)) return { from: at - 730 * day, to: at - 180 * day };
  return undefined;
}

/** Capitalised words of `text` that the question does not contain (names, places): second-pass seeds. */
export function newNames(text: string, query: string): string[] {
  const asked = new Set(query.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []);
  const names = new Set<string>();
  // Skip the first word of each sentence and a "Speaker:" prefix: capitalised for other reasons.
  for (const sentence of text.split(/(?<=[.!?:])\s+/)) {
    const words = sentence.match(/[\p{L}\p{N}']+/gu) ?? [];
    for (const word of words.slice(1)) {
      const bare = word.replace(/'s$/, "");
      if (/^\p{Lu}\p{Ll}{2,}$/u.test(bare) && !asked.has(bare.toLowerCase())) names.add(bare);
    }
  }
  return [...names];
}

function speakerOf(memory: StoredMemory): string | undefined {
  const speaker = memory.metadata.speaker;
  return typeof speaker === "string" && speaker.length > 0 ? speaker : undefined;
}

/** Whether two memories are turns of one conversation (so neighbours by write order). */
export function sameConversation(left: StoredMemory, right: StoredMemory): boolean {
  if (left.sessionId !== undefined && left.sessionId === right.sessionId) return true;
  return speakerOf(left) !== undefined && speakerOf(right) !== undefined;
}

export interface Scored {
  readonly memory: StoredMemory;
  readonly score: number;
}

/** Lifts memories inside the question's time window and memories by a speaker it names. */
export function liftByTimeAndSpeaker(
  hits: readonly Scored[],
  query: string,
  window: TimeWindow | undefined,
): Scored[] {
  const words = new Set(query.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []);
  return hits.map((hit) => {
    let score = hit.score;
    if (window) {
      const at = Date.parse(hit.memory.createdAt);
      if (at >= window.from && at < window.to) score *= 2;
    }
    const speaker = speakerOf(hit.memory);
    if (speaker && words.has(speaker.toLowerCase())) score *= 1.6;
    return { memory: hit.memory, score };
  });
}

/** Adds second-pass hits (scaled below the first pass's best) to the first pass. */
export function mergeSecondPass(first: readonly Scored[], second: readonly Scored[], weight = 0.8): Scored[] {
  const merged = new Map(first.map((hit) => [hit.memory.id, hit]));
  const top = first[0]?.score ?? 0;
  const secondTop = second[0]?.score ?? 0;
  if (secondTop <= 0) return [...merged.values()];
  for (const hit of second) {
    const score = (hit.score / secondTop) * top * weight;
    const existing = merged.get(hit.memory.id);
    if (!existing || existing.score < score) merged.set(hit.memory.id, { memory: hit.memory, score });
  }
  return [...merged.values()].sort(byScore);
}

/** Each turn next to a hit gets part of the hit's score (halving with each step away). */
export function spreadToNeighbours(
  hits: readonly Scored[],
  neighbours: ReadonlyMap<string, { memory: StoredMemory; offset: number }[]>,
  share = 0.35,
  answerShare = 0.7,
): Scored[] {
  const scores = new Map(hits.map((hit) => [hit.memory.id, { memory: hit.memory, score: hit.score }]));
  for (const hit of hits) {
    for (const { memory, offset } of neighbours.get(hit.memory.id) ?? []) {
      if (!sameConversation(hit.memory, memory)) continue;
      // The turn right after a question is its likeliest answer: it gets more of the question's score.
      const step = offset === 1 && hit.memory.content.includes("?") ? answerShare : share;
      const gain = hit.score * step * 0.5 ** (Math.abs(offset) - 1);
      const entry = scores.get(memory.id);
      if (entry) entry.score += gain;
      else scores.set(memory.id, { memory, score: gain });
    }
  }
  return [...scores.values()].sort(byScore);
}

/** A result nearly repeating a better one is moved below the distinct ones. */
export function diversify<T extends { readonly memory: StoredMemory }>(
  hits: readonly T[],
  similarity = 0.8,
): T[] {
  const kept: T[] = [];
  const repeats: T[] = [];
  for (const hit of hits) {
    if (kept.some((other) => textSimilarity(other.memory.content, hit.memory.content) >= similarity)) {
      repeats.push(hit);
    } else kept.push(hit);
  }
  return [...kept, ...repeats];
}
