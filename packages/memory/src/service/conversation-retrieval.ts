/**
 * Retrieval built for conversations, on top of the store's BM25 (no model in the loop):
 *   - time-aware: "in May 2023", "last May", "last week" become a window; memories stored inside it
 *     are lifted, and the candidate pool widens so that a turn matching only the window is there;
 *   - speaker-aware: a memory whose `metadata.speaker` is named in the question is lifted (more when
 *     they speak of themselves, not when they only ask), and so is a question put to them by name;
 *   - multi-hop: names found in the first hits and absent from the question seed a second pass
 *     ("Maya's sister" → "Lena" → "Lena played her violin");
 *   - neighbouring turns: a turn next to a hit (same session, or both with a speaker) shares its
 *     score, so the reply that answers a question is found through the question before it; the turn
 *     right after a hit that asks something ("Did you pick a name yet?") gets twice the share;
 *   - diversified: a near-copy of a better-ranked result is pushed down.
 */
import type { StoredMemory } from "../store/memory-store.ts";
import { cachedIndexTokens, termTest } from "../text/index-tokens.ts";
import { byScore } from "./rank-memories.ts";
import { isStopWord, jaccard, wordSet } from "./text.ts";

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

/** The capitalised words of a text that are not the first of a sentence, nor a "Speaker:" prefix. */
export function midSentenceNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const sentence of text.split(/(?<=[.!?:])\s+/)) {
    const words = sentence.match(/[\p{L}\p{N}'’]+/gu) ?? [];
    for (const word of words.slice(1)) {
      const bare = word.replace(/['’]s$/u, "");
      if (/^\p{Lu}\p{Ll}{2,}$/u.test(bare)) names.add(bare);
    }
  }
  return names;
}

/**
 * The names among some texts: capitalised words inside sentences, and capitalised words opening one
 * that the texts never write in lowercase ("Vera, who I met at my running club, …" — while "Sad" of
 * "Sad news" is also written "sad" somewhere, and an English word opening a sentence usually is).
 */
export function namesIn(texts: readonly string[], sentenceOpeners = true): Set<string> {
  const names = new Set<string>();
  const lower = new Set<string>();
  const openers = new Set<string>();
  for (const text of texts) {
    for (const name of midSentenceNames(text)) names.add(name);
    for (const word of text.match(/[\p{L}]+/gu) ?? []) {
      if (/^\p{Ll}/u.test(word)) lower.add(word);
    }
    for (const sentence of text.split(/(?<=[.!?:])\s+/)) {
      const first = sentence.match(/^[\p{L}]+/u)?.[0];
      if (first && /^\p{Lu}\p{Ll}{2,}$/u.test(first) && !sentence.endsWith(":")) openers.add(first);
    }
  }
  if (!sentenceOpeners) return names;
  for (const word of openers) if (!lower.has(word.toLowerCase()) && !isStopWord(word)) names.add(word);
  return names;
}

/**
 * Capitalised words of `text` that the question does not contain (names, places): second-pass seeds.
 * A word opening a sentence is capitalised anyway, so it counts only when `knownNames` (the names
 * seen inside sentences of other memories) holds it: "Lena played her violin" seeds "Lena".
 */
export function newNames(text: string, query: string, knownNames: ReadonlySet<string> = new Set()): string[] {
  const asked = new Set(query.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []);
  const names = new Set<string>();
  for (const sentence of text.split(/(?<=[.!?:])\s+/)) {
    const words = sentence.match(/[\p{L}\p{N}'’]+/gu) ?? [];
    words.forEach((word, index) => {
      const bare = word.replace(/['’]s$/u, "");
      if (!/^\p{Lu}\p{Ll}{2,}$/u.test(bare) || asked.has(bare.toLowerCase())) return;
      // A "Speaker:" prefix is no seed: the speaker's every turn would match it.
      if (index === 0 && (sentence.endsWith(":") || !knownNames.has(bare))) return;
      names.add(bare);
    });
  }
  return [...names];
}

/**
 * Who said a turn: `metadata.speaker`, else a "Maya: …" prefix of its text (a turn added plainly as
 * `Speaker: text` is a turn too, ADR 0361).
 */
export function speakerOf(memory: StoredMemory): string | undefined {
  const speaker = memory.metadata.speaker;
  if (typeof speaker === "string" && speaker.length > 0) return speaker;
  return speakerPrefix(memory.content);
}

/** The "Maya: " or "Dr Lee: " that opens a turn written as `Speaker: text`, if any. */
export function speakerPrefix(content: string): string | undefined {
  return content.match(/^(\p{Lu}[\p{L}'’.-]{0,30}(?: \p{Lu}[\p{L}'’.-]{0,30})?):\s/u)?.[1];
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

/** A turn where the owner a question names speaks of the thing owned ("my sister"); set on the dev halves. */
const possessiveLift = 2;

/**
 * "Maya's sister" in a question: the owner and the thing owned (lowercased, the thing cut to its
 * singular so "sisters" and "sister" meet, matched as a prefix). In Maya's own turns she says "my sister".
 */
export function possessivesOf(query: string): { owner: string; thing: string }[] {
  const found: { owner: string; thing: string }[] = [];
  for (const match of query.matchAll(/\b(\p{Lu}[\p{L}-]+)['’]s\s+(\p{L}+)/gu)) {
    const thing = match[2]!.toLowerCase();
    found.push({ owner: match[1]!.toLowerCase(), thing: thing.length > 4 ? thing.replace(/s$/, "") : thing });
  }
  return found;
}

/** Whether every sentence of a turn is a question ("Did you pick a name yet?"), nothing told. */
export function onlyAsks(content: string): boolean {
  const sentences = content
    .replace(/^[^:\n]{1,40}:\s+/u, "")
    .split(/(?<=[.!?])\s+/u)
    .filter((sentence) => /[\p{L}\p{N}]/u.test(sentence));
  return sentences.length > 0 && sentences.every((sentence) => sentence.trimEnd().endsWith("?"));
}

/**
 * A turn by the person a question names: ×1.6 when they speak of themselves ("I love it"), ×1.3 when
 * they speak of others ("My neighbour works as a nurse"); set on the dev halves.
 */
const speakerLift = 1.6;
const otherSpeakerLift = 1.3;
/** The reply to a question put by name to the one asked about takes all of its score (dev halves). */
const addressedAnswerShare = 1;

/** Whether a turn speaks of its speaker in the first person singular ("I love it", "I'm a nurse"). */
export function speaksOfSelf(content: string): boolean {
  return /(?:^|[^\p{L}'’])(?:I|I['’](?:m|ve|d|ll)|me|myself)(?![\p{L}'’])/u.test(
    content.replace(/^[^:\n]{1,40}:\s+/u, ""),
  );
}
/** The names a question asks about, lowercased: its capitalised words after the first ("Maya's"). */
export function askedNames(query: string): Set<string> {
  return new Set([...midSentenceNames(query)].map((name) => name.toLowerCase()));
}

/** Whether a turn (past its "Speaker:" prefix) names someone the question asks about ("Maya, how's…?"). */
export function addresses(content: string, names: ReadonlySet<string>): boolean {
  if (names.size === 0) return false;
  const text = content.replace(/^[^:\n]{1,40}:\s+/u, "");
  for (const word of text.match(/\p{Lu}[\p{L}]+/gu) ?? []) if (names.has(word.toLowerCase())) return true;
  return false;
}

/** Lifts memories inside the question's time window and memories by a speaker it names. */
export function liftByTimeAndSpeaker(
  hits: readonly Scored[],
  query: string,
  window: TimeWindow | undefined,
  /** Off: only the time window lifts (bench/memory's ablation). */
  speakers = true,
): Scored[] {
  const words = new Set(query.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []);
  const names = askedNames(query);
  const possessives = possessivesOf(query);
  return hits.map((hit) => {
    let score = hit.score;
    if (window) {
      const at = Date.parse(hit.memory.createdAt);
      if (at >= window.from && at < window.to) score *= 2;
    }
    if (!speakers) return { memory: hit.memory, score };
    const speaker = speakerOf(hit.memory);
    // A speaker's own question ("How is the new job going, Jonas?") is about the one asked, not them;
    // a turn speaking of someone else ("My neighbour works as a nurse") is about them.
    // A question put to the person asked about ("How is the new job going, Maya?") is about them: its
    // answer follows it.
    if (speaker && words.has(speaker.toLowerCase()) && !onlyAsks(hit.memory.content)) {
      score *= speaksOfSelf(hit.memory.content) ? speakerLift : otherSpeakerLift;
    } else if (speaker && onlyAsks(hit.memory.content) && addresses(hit.memory.content, names)) {
      score *= speakerLift;
    }
    if (possessives.length > 0) {
      const content = hit.memory.content.toLowerCase();
      const own = possessives.some(
        ({ owner, thing }) =>
          (speaker?.toLowerCase() === owner && new RegExp(`\\b(?:my|our)\\s+${thing}`, "u").test(content)) ||
          content.includes(`${owner}'s ${thing}`),
      );
      if (own) score *= possessiveLift;
    }
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
  /** The names the question asks about (`askedNames`): a reply by one asked by name is their answer. */
  asked: ReadonlySet<string> = new Set(),
): Scored[] {
  const scores = new Map(hits.map((hit) => [hit.memory.id, { memory: hit.memory, score: hit.score }]));
  for (const hit of hits) {
    const putTo = asked.size > 0 && onlyAsks(hit.memory.content) && addresses(hit.memory.content, asked);
    for (const { memory, offset } of neighbours.get(hit.memory.id) ?? []) {
      if (!sameConversation(hit.memory, memory)) continue;
      // The turn right after a question is its likeliest answer: it gets more of the question's score,
      // all of it when the question was put by name to its speaker, whom the question asks about.
      const step =
        offset === 1 && putTo && asked.has(speakerOf(memory)?.toLowerCase() ?? "")
          ? addressedAnswerShare
          : offset === 1 && hit.memory.content.includes("?")
            ? answerShare
            : share;
      const gain = hit.score * step * 0.5 ** (Math.abs(offset) - 1);
      const entry = scores.get(memory.id);
      if (entry) entry.score += gain;
      else scores.set(memory.id, { memory, score: gain });
    }
  }
  return [...scores.values()].sort(byScore);
}

/**
 * A result nearly repeating a better one is moved below the distinct ones; only the first `limit`
 * distinct results are looked for (the rest keep their order after them).
 */
export function diversify<T extends { readonly memory: StoredMemory }>(
  hits: readonly T[],
  limit = hits.length,
  similarity = 0.8,
): T[] {
  const kept: { hit: T; words: Set<string> }[] = [];
  const repeats: T[] = [];
  let index = 0;
  for (; index < hits.length && kept.length < limit; index += 1) {
    const hit = hits[index]!;
    const words = wordSet(hit.memory.content);
    if (kept.some((other) => jaccard(other.words, words) >= similarity)) repeats.push(hit);
    else kept.push({ hit, words });
  }
  return [...kept.map((entry) => entry.hit), ...repeats, ...hits.slice(index)];
}

/** Context coverage: a turn covering none of the question's terms keeps this share of its score (dev halves). */
const coverageFloor = 0.5;
/** The turns around a hit that count as its context: two before (the question and what it asks about), one after. */
const contextBefore = 2;
const contextAfter = 1;

/**
 * Lifts turns that say something specific: the mean rarity (among the hits) of a turn's words,
 * relative to the most specific hit, scaled by `weight`. Small talk repeats its words ("Haha,
 * totally", "How was your week?"); a turn reporting an event uses words said once or twice.
 */
export function liftBySpecificity(hits: readonly Scored[], weight: number): Scored[] {
  if (weight === 0 || hits.length < 5) return [...hits];
  const words = hits.map((hit) => {
    const content = hit.memory.content.replace(/^[^:\n]{1,40}:\s+/u, "");
    return new Set(cachedIndexTokens(content).filter((token) => token.length > 2));
  });
  const frequency = new Map<string, number>();
  for (const set of words) for (const word of set) frequency.set(word, (frequency.get(word) ?? 0) + 1);
  const specificity = words.map((set) => {
    if (set.size === 0) return 0;
    let sum = 0;
    for (const word of set) sum += Math.log(hits.length / frequency.get(word)!);
    return sum / set.size;
  });
  const most = Math.max(...specificity);
  if (most <= 0) return [...hits];
  return hits
    .map((hit, index) => ({
      memory: hit.memory,
      score: hit.score * (1 + (weight * specificity[index]!) / most),
    }))
    .sort(byScore);
}

/**
 * The turns around each memory that the neighbour lookup reached, by offset from it: the anchors'
 * windows read both ways, so a neighbour also knows the anchor and the anchor's other neighbours.
 */
export function contextTurns(
  anchors: readonly StoredMemory[],
  neighbours: ReadonlyMap<string, { memory: StoredMemory; offset: number }[]>,
): Map<string, Map<number, StoredMemory>> {
  const context = new Map<string, Map<number, StoredMemory>>();
  for (const anchor of anchors) {
    const window = [{ memory: anchor, offset: 0 }, ...(neighbours.get(anchor.id) ?? [])];
    for (const from of window) {
      let around = context.get(from.memory.id);
      if (!around) {
        around = new Map();
        context.set(from.memory.id, around);
      }
      for (const to of window) {
        if (to === from || !sameConversation(from.memory, to.memory)) continue;
        around.set(to.offset - from.offset, to.memory);
      }
    }
  }
  return context;
}

/**
 * Scales each hit by the share of the question's terms (weighted by their rarity among the hits)
 * that the turn and the turns just before and after it hold together: the reply "Yes, Ziggy!" after
 * "Did you pick a name yet?" after "We adopted a beagle" covers "What did Maya name the beagle?",
 * while a turn sharing one common word with it does not.
 */
export function scaleByContextCoverage(
  hits: readonly Scored[],
  context: ReadonlyMap<string, ReadonlyMap<number, StoredMemory>>,
  terms: readonly string[],
  /** A term's related words (`relatedWords`) cover it too: "job" covers "work". */
  alternatives: ReadonlyMap<string, readonly string[]> = new Map(),
  /** A second hop's first hop: the two cover the question together. */
  chains: ReadonlyMap<string, StoredMemory> = new Map(),
): Scored[] {
  const tests = terms.flatMap((term) => {
    const all = [term, ...(alternatives.get(term) ?? [])].flatMap((each) => termTest(each) ?? []);
    if (all.length === 0) return [];
    return [(token: string) => all.some((test) => test(token))];
  });
  if (tests.length < 2) return [...hits];
  const matched = new Map<string, boolean[]>();
  const matches = (memory: StoredMemory) => {
    let found = matched.get(memory.id);
    if (!found) {
      const tokens = cachedIndexTokens(memory.content);
      found = tests.map((test) => tokens.some(test));
      matched.set(memory.id, found);
    }
    return found;
  };
  const frequency = tests.map(() => 0);
  for (const hit of hits) {
    for (const [index, yes] of matches(hit.memory).entries()) if (yes) frequency[index]! += 1;
  }
  const weight = frequency.map((count) => Math.log(1 + (hits.length - count + 0.5) / (count + 0.5)));
  const total = weight.reduce((sum, value) => sum + value, 0);
  if (total <= 0) return [...hits];
  return hits
    .map((hit) => {
      const covered = [...matches(hit.memory)];
      for (const [offset, memory] of context.get(hit.memory.id) ?? []) {
        if (offset < -contextBefore || offset > contextAfter) continue;
        for (const [index, yes] of matches(memory).entries()) if (yes) covered[index] = true;
      }
      const from = chains.get(hit.memory.id);
      if (from) for (const [index, yes] of matches(from).entries()) if (yes) covered[index] = true;
      const share = covered.reduce((sum, yes, index) => sum + (yes ? weight[index]! : 0), 0) / total;
      const factor = coverageFloor + (1 - coverageFloor) * share;
      return { memory: hit.memory, score: hit.score * factor };
    })
    .sort(byScore);
}
