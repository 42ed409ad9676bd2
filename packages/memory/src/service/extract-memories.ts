/**
 * Deterministic memory extraction from a user turn: first-person statements become memories.
 * No model is needed; a configured language model is not used here, so writes stay fast.
 */
import type { MemoryKind } from "../schemas/memory.ts";

export interface ExtractedMemory {
  readonly content: string;
  readonly kind: MemoryKind;
}

const firstPerson = /\b(i|i'm|i've|i'd|i'll|im|my|mine|we|we're|our)\b/i;
const preference =
  /\b(like|love|prefer|prefers|enjoy|hate|dislike|favou?rite|allergic|want|vegetarian|vegan)\b/i;
const procedure = /\b(always|never|whenever|every time|make sure|remember to)\b/i;

export function extractMemories(text: string): ExtractedMemory[] {
  const sentences = text
    .split(/(?<=[.!?])\s+|\n+/u)
    .map((sentence) => sentence.trim())
    .filter((sentence) => sentence.length >= 12 && sentence.length <= 500);
  const found: ExtractedMemory[] = [];
  for (const sentence of sentences) {
    if (sentence.endsWith("?") || !firstPerson.test(sentence)) continue;
    const kind: MemoryKind = preference.test(sentence)
      ? "preference"
      : procedure.test(sentence)
        ? "procedure"
        : "fact";
    found.push({ content: sentence, kind });
  }
  return found.slice(0, 10);
}
