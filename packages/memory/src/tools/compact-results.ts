/**
 * What the read tools answer a model: by default only what it uses — id, text, kind, date, score —
 * within a token budget counted with a real tokenizer (`gpt-tokenizer`, o200k). Past the budget the
 * answer says how many results were left out and gives a cursor to read on; never a silent cut.
 * `details: true` answers the service's whole records.
 */
import { countTokens } from "@tackle/core/tokens";
import type { MemoryEvent } from "../schemas/event.ts";
import type { SearchKnowledgeResponse } from "../schemas/knowledge.ts";
import type { Memory } from "../schemas/memory.ts";

/** The default token budget of one tool answer. */
export const TOOL_RESULT_TOKEN_BUDGET = 2000;

export interface CompactMemory {
  readonly id: string;
  readonly text: string;
  readonly kind: Memory["kind"];
  /** The day it was stored (YYYY-MM-DD). */
  readonly date: string;
  readonly score?: number;
}

export function compactMemory(memory: Memory, score?: number): CompactMemory {
  return {
    id: memory.id,
    text: memory.content,
    kind: memory.kind,
    date: memory.createdAt.slice(0, 10),
    ...(score === undefined ? {} : { score: Number(score.toFixed(3)) }),
  };
}

export function compactEvent(event: MemoryEvent) {
  return { id: event.id, role: event.role, text: event.content, date: event.occurredAt.slice(0, 10) };
}

export function compactChunk(result: SearchKnowledgeResponse["results"][number]) {
  return {
    id: result.chunkId,
    documentId: result.documentId,
    title: result.title,
    text: result.content,
    score: Number(result.score.toFixed(3)),
  };
}

/**
 * The longest prefix of `items` whose JSON fits `budget` tokens (at least one item, so a single
 * long item is still answered); `rest` is how many were left out.
 */
export function withinBudget<T>(items: readonly T[], budget = TOOL_RESULT_TOKEN_BUDGET) {
  let used = 0;
  const kept: T[] = [];
  for (const item of items) {
    const cost = countTokens(JSON.stringify(item)) + 1;
    if (kept.length > 0 && used + cost > budget) break;
    kept.push(item);
    used += cost;
  }
  return { kept, rest: items.length - kept.length, tokens: used };
}
