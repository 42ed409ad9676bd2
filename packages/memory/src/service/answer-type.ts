/**
 * The kind of answer a question asks for, as a prior: a question that asks when (or how long) lifts
 * the hits that say a time, one that asks how much or how many lifts the hits that hold a number.
 * The oldest device of question answering over text (TREC's answer types), in English only: a
 * question in another language, or one that asks for neither, changes nothing (ADR 0527).
 */
import type { StoredMemory } from "../store/memory-store.ts";
import type { Scored } from "./conversation-retrieval.ts";
import { byScore } from "./rank-memories.ts";

export type AnswerType = "time" | "number";

/** How much a hit holding the asked-for kind of answer gains: a share of its own score. */
export const answerTypeWeight = 0.5;

const askedFor: readonly [AnswerType, RegExp][] = [
  [
    "time",
    /(^|[.?!]\s+)((about|around|roughly|approximately) )?when\b|\bhow long\b|\bhow much time\b|\b(which|what) (dates?|days?|months?|years?|weeks?|time|night)\b|\bthe dates?\b/i,
  ],
  ["number", /\bhow (much|many|old|far)\b|\bwhat (price|score|number|amount)\b/i],
];

const months =
  "january|february|march|april|june|july|august|september|october|november|december|jan|feb|apr|jun|jul|aug|sept?|oct|nov|dec";
const days =
  "monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend|tonight|yesterday|tomorrow|today";
const counts = "\\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|couple of";
const timePattern = new RegExp(
  [
    `\\b(${months}|${days}|ago|since|until)\\b`,
    "\\b(last|next|this) (night|week|month|year|morning|evening|spring|summer|fall|autumn|winter)\\b",
    `\\b(${counts}) (minutes?|hours?|days?|weeks?|months?|years?)\\b`,
    "\\b\\d{4}\\b|\\b\\d{1,2}(st|nd|rd|th)\\b|\\b\\d{1,2}(:\\d{2})? ?(am|pm)\\b",
  ].join("|"),
  "i",
);
/** "May" only as a month: capitalized, or before a day's number ("I may go" says no time). */
const mayPattern = /\bMay\b|\bmay \d/;
const numberPattern =
  /[$€£¥]|\b\d+([.,]\d+)?\b|\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|hundred|thousand|million|half|dozen)\b/i;

/** What kind of answer the question asks for, if it asks for a time or a number. */
export function answerTypeOf(question: string): AnswerType | undefined {
  return askedFor.find(([, pattern]) => pattern.test(question))?.[0];
}

/** Whether a text says something of that kind (a time, a number). */
export function holdsAnswerType(text: string, type: AnswerType): boolean {
  if (type === "number") return numberPattern.test(text);
  return timePattern.test(text) || mayPattern.test(text);
}

const known = new WeakMap<StoredMemory, Partial<Record<AnswerType, boolean>>>();

/**
 * `holdsAnswerType` for a memory, remembered while its object lives: a search tests up to a few
 * hundred candidates of up to 32,000 characters (~0.08 ms each per 8,000 characters), and the scope
 * kept in process (ADR 0369) hands the same objects to search after search until a write.
 */
function memoryHolds(memory: StoredMemory, type: AnswerType): boolean {
  let answers = known.get(memory);
  if (answers === undefined) {
    answers = {};
    known.set(memory, answers);
  }
  answers[type] ??= holdsAnswerType(memory.content, type);
  return answers[type];
}

/** The hits, those holding the kind of answer the question asks for lifted by `weight` of their score. */
export function liftByAnswerType(
  hits: readonly Scored[],
  question: string,
  weight = answerTypeWeight,
): Scored[] {
  const type = answerTypeOf(question);
  if (type === undefined) return [...hits];
  return hits
    .map((hit) =>
      memoryHolds(hit.memory, type) ? { memory: hit.memory, score: hit.score * (1 + weight) } : hit,
    )
    .sort(byScore);
}
