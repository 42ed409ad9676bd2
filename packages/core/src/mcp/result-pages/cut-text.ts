/**
 * Where a text is cut when it does not fit: the longest piece within the token limit, ending at the
 * best boundary in reach — after an element of a JSON value (the shallowest level that keeps at least
 * half the piece), else after a line, else after a space, else between two characters (never inside a
 * surrogate pair).
 */
import { fitsTokens, prefixWithinTokens } from "../../tokens/count-tokens.ts";
import { createTextScan, scannedCharacters, type TextScan } from "./text-scan.ts";

/**
 * The end (exclusive) of the piece of `text` that starts at `start` and fits `limit` tokens; `start`
 * when not even one character fits. The piece is `text.slice(start, end)`. `scan` is what earlier cuts
 * of the same text learnt (a kept answer passes its own, so each page reads about itself, ADR 0558).
 */
export function cutText(text: string, start: number, limit: number, scan = createTextScan(text)): number {
  let reach = start + prefixWithinTokens(text.slice(start), limit);
  if (reach === text.length) return text.length;
  // A token count is not quite monotone in the length: check the piece chosen, and reach back if needed.
  while (reach > start) {
    const end = bestBoundary(text, scan, start, reach);
    if (fitsTokens(text.slice(start, end), limit)) return end;
    reach = end - 1;
  }
  return start;
}

function bestBoundary(text: string, scan: TextScan, start: number, reach: number): number {
  const half = start + Math.ceil((reach - start) / 2);
  const json = scan.jsonBoundary(half, reach);
  if (json !== undefined) return json;
  const line = lineEnd(text, half, reach);
  if (line !== undefined) return line;
  for (let index = reach; index > half; index--) {
    if (isSpace(text.charCodeAt(index - 1))) return index;
  }
  return characterBoundary(text, reach);
}

/** The end of the last line that ends in `[half, reach]` (after its `\n`), read back from `reach` no further. */
function lineEnd(text: string, half: number, reach: number): number | undefined {
  for (let index = reach - 1; index >= half - 1; index--) {
    if (text.charCodeAt(index) === 10) {
      scannedCharacters.count += reach - index;
      return index + 1;
    }
  }
  scannedCharacters.count += reach - half + 1;
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
