/**
 * `cutText` as it was before ADR 0558, kept verbatim as the oracle of the cuts since: its JSON
 * boundary read the text from its start to the cut on every cut, so each page of a long JSON answer
 * cost its offset. The cuts since must end every piece where this one did.
 */
import { fitsTokens, prefixWithinTokens } from "../../src/tokens/count-tokens.ts";

/**
 * The end (exclusive) of the piece of `text` that starts at `start` and fits `limit` tokens; `start`
 * when not even one character fits. The piece is `text.slice(start, end)`.
 */
export function cutTextBefore0558(text: string, start: number, limit: number): number {
  let reach = start + prefixWithinTokens(text.slice(start), limit);
  if (reach === text.length) return text.length;
  // A token count is not quite monotone in the length: check the piece chosen, and reach back if needed.
  while (reach > start) {
    const end = bestBoundary(text, start, reach);
    if (fitsTokens(text.slice(start, end), limit)) return end;
    reach = end - 1;
  }
  return start;
}

function bestBoundary(text: string, start: number, reach: number): number {
  const half = start + Math.ceil((reach - start) / 2);
  const json = looksLikeJson(text) ? jsonBoundaryBefore0558(text, half, reach) : undefined;
  if (json !== undefined) return json;
  const line = text.lastIndexOf("\n", reach - 1) + 1;
  if (line >= half) return line;
  for (let index = reach; index > half; index--) {
    if (isSpace(text.charCodeAt(index - 1))) return index;
  }
  return characterBoundary(text, reach);
}

function looksLikeJson(text: string): boolean {
  const first = text.trimStart()[0];
  return first === "{" || first === "[";
}

/**
 * The end of the last JSON element before `reach` at the shallowest nesting level whose last element
 * ends at or after `half`: right after a `,` that separates array items or object members.
 */
export function jsonBoundaryBefore0558(text: string, half: number, reach: number): number | undefined {
  // Per depth, the last comma (+1) seen before `reach`.
  const lastAtDepth: number[] = [];
  let depth = 0;
  let inString = false;
  for (let index = 0; index < reach; index++) {
    const code = text.charCodeAt(index);
    if (inString) {
      if (code === 92 /* \ */) index++;
      else if (code === 34 /* " */) inString = false;
      continue;
    }
    if (code === 34) inString = true;
    else if (code === 123 /* { */ || code === 91 /* [ */) depth++;
    else if (code === 125 /* } */ || code === 93 /* ] */) depth = Math.max(0, depth - 1);
    else if (code === 44 /* , */ && index + 1 <= reach) lastAtDepth[depth] = index + 1;
  }
  let best = -1;
  for (let level = 0; level < lastAtDepth.length; level++) {
    best = Math.max(best, lastAtDepth[level] ?? -1);
    if (best >= half) return best;
  }
  return undefined;
}

function isSpace(code: number): boolean {
  return code === 32 || code === 9 || code === 13 || code === 10;
}

/** `index`, or one before it when it would split a surrogate pair. */
function characterBoundary(text: string, index: number): number {
  const before = text.charCodeAt(index - 1);
  return before >= 0xd800 && before <= 0xdbff ? index - 1 : index;
}
