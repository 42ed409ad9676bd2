/**
 * Retrieval built for conversations, on top of the store's BM25 (no model in the loop); what
 * bench/memory's ablation keeps on its long, hand-written held-out set (ADRs 0367, 0521, 0522):
 * neighbouring turns. A turn next to a hit (same session, or both with a speaker; counted in turns,
 * ADR 0523) shares its score, so the reply that answers a question is found through the question
 * before it; the turn right after a hit that asks something ("Did you pick a name yet?") gets twice
 * the share.
 */
import type { StoredMemory } from "../store/memory-store.ts";
import { byScore } from "./rank-memories.ts";

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

/**
 * Whether a memory is a turn of a conversation: an episode, or a memory that names its speaker. A
 * fact or preference mined from a turn is not one, though it is written beside it in its session.
 */
export function isTurn(memory: StoredMemory): boolean {
  return memory.kind === "episode" || speakerOf(memory) !== undefined;
}

/** Whether two memories are turns of one conversation (so neighbours by write order). */
export function sameConversation(left: StoredMemory, right: StoredMemory): boolean {
  if (!isTurn(left) || !isTurn(right)) return false;
  if (left.sessionId !== undefined && left.sessionId === right.sessionId) return true;
  return speakerOf(left) !== undefined && speakerOf(right) !== undefined;
}

export interface Scored {
  readonly memory: StoredMemory;
  readonly score: number;
}

/** How many turns each side of a hit share its score. */
export const neighbourTurns = 2;

/**
 * The memories read around a hit to find its `neighbourTurns` turns each side: facts mined from the
 * turns (events and imports with extraction) are written between them and are skipped.
 */
export const neighbourReach = 3 * neighbourTurns;

/**
 * A hit's turns of the same conversation in write order, `window` each side at most, their offsets
 * counted in turns: the memories written between them that are not its turns (facts mined from a
 * turn) do not push a turn out of the window.
 */
export function neighbouringTurns(
  hit: StoredMemory,
  around: readonly { memory: StoredMemory; offset: number }[],
  window = neighbourTurns,
): { memory: StoredMemory; offset: number }[] {
  const turns = around.filter(({ memory }) => sameConversation(hit, memory));
  const before = turns.filter(({ offset }) => offset < 0).sort((left, right) => right.offset - left.offset);
  const after = turns.filter(({ offset }) => offset > 0).sort((left, right) => left.offset - right.offset);
  return [
    ...before.slice(0, window).map(({ memory }, index) => ({ memory, offset: -(index + 1) })),
    ...after.slice(0, window).map(({ memory }, index) => ({ memory, offset: index + 1 })),
  ];
}

/** Each turn next to a hit gets part of the hit's score (halving with each turn away). */
export function spreadToNeighbours(
  hits: readonly Scored[],
  neighbours: ReadonlyMap<string, readonly { memory: StoredMemory; offset: number }[]>,
  share = 0.35,
  answerShare = 0.7,
): Scored[] {
  const scores = new Map(hits.map((hit) => [hit.memory.id, { memory: hit.memory, score: hit.score }]));
  for (const hit of hits) {
    const asks = hit.memory.content.includes("?");
    for (const { memory, offset } of neighbouringTurns(hit.memory, neighbours.get(hit.memory.id) ?? [])) {
      // The turn right after a question is its likeliest answer: it gets more of the question's score.
      const step = offset === 1 && asks ? answerShare : share;
      const gain = hit.score * step * 0.5 ** (Math.abs(offset) - 1);
      const entry = scores.get(memory.id);
      if (entry) entry.score += gain;
      else scores.set(memory.id, { memory, score: gain });
    }
  }
  return [...scores.values()].sort(byScore);
}
