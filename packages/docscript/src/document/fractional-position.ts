/**
 * Order keys for ordered relations: strings that sort between their neighbours, so a move is one write
 * and concurrent inserts never renumber anyone. Equal keys (concurrent inserts at one spot) tie-break by
 * id. Keys come from `fractional-indexing` (ADR 0476): appending or prepending grows a key by one
 * character per 62^n-ish inserts (10,000 appends stay at 4 characters), unlike the halving keys before.
 */
import { generateKeyBetween } from "fractional-indexing";

/** The alphabet of the keys written before ADR 0476 (and of the fallback): every ASCII char from "0" to "z". */
const first = "0".charCodeAt(0);
const span = "z".charCodeAt(0) - first + 1;

/** A key strictly between `before` and `after` (either may be absent: the list's ends). */
export function positionBetween(before: string | undefined, after: string | undefined): string {
  const fits = (key: string) =>
    (before === undefined || before < key) && (after === undefined || key < after);
  let key: string | undefined;
  try {
    // The library reads only its own keys; given another (a key written before ADR 0476, or by
    // another writer, "~…"), it may answer a key outside the neighbours rather than throw.
    key = generateKeyBetween(before ?? null, after ?? null);
  } catch {
    key = undefined;
  }
  if (key !== undefined && fits(key)) return key;
  // Equal neighbours (concurrent inserts at one spot) have no key between them: ids break the tie.
  if (before !== undefined && after !== undefined && after <= before) return midpoint(before, after);
  // An append past a key the library does not read: the shortest key after it (the midpoint grew
  // a character every ~5 appends).
  if (after === undefined) return successor(before ?? "");
  key = midpoint(before ?? "", after);
  // The midpoint reads every character as a digit from "0" to "z": next to a key holding one
  // outside them ("~…", "'…") it can land outside its neighbours.
  return fits(key) ? key : outside(before, after);
}

/** The first and last printable ASCII characters: key characters between them can move by one. */
const lowest = 0x20;
const highest = 0x7e;

/** A key strictly between `before` and `after` (`before` < `after`), for keys of any characters. */
function outside(before: string | undefined, after: string): string {
  if (before === undefined || before === "") return predecessor(after);
  if (after.startsWith(before)) return before + predecessor(after.slice(before.length));
  return `${before}V`;
}

/**
 * The shortest key after `key` that keeps its prefix: its first character below "~" raised by one
 * (every later one dropped), else `key` and a "0". Keys stay as long as `key` while an append can
 * raise a character, and grow a character every ~80 appends past "~~…".
 */
function successor(key: string): string {
  for (let at = 0; at < key.length; at++) {
    const code = key.charCodeAt(at);
    if (code >= lowest && code < highest) return key.slice(0, at) + String.fromCharCode(code + 1);
  }
  return `${key}0`;
}

/** A key before `key`: its first character above " " lowered by one, every later one dropped. */
function predecessor(key: string): string {
  for (let at = 0; at < key.length; at++) {
    const code = key.charCodeAt(at);
    if (code > lowest && code <= highest + 1) return key.slice(0, at) + String.fromCharCode(code - 1);
  }
  throw new Error(`no order key sorts before ${JSON.stringify(key.slice(0, 40))}`);
}

function digit(text: string, at: number): number {
  const code = text.charCodeAt(at);
  return Number.isNaN(code) ? 0 : Math.min(span - 1, Math.max(0, code - first));
}

/** The fraction halfway between two keys read as digits from "0" to "z" (a key never ends in "0"). */
function midpoint(low: string, high: string | null): string {
  if (high !== null) {
    let shared = 0;
    while (shared < high.length && (low[shared] ?? "0") === high[shared]) shared++;
    if (shared > 0) return high.slice(0, shared) + midpoint(low.slice(shared), high.slice(shared));
  }
  const lowDigit = low.length > 0 ? digit(low, 0) : 0;
  const highDigit = high !== null && high.length > 0 ? digit(high, 0) : span;
  if (highDigit - lowDigit > 1) return String.fromCharCode(first + Math.round((lowDigit + highDigit) / 2));
  if (high !== null && high.length > 1) return high.slice(0, 1);
  return String.fromCharCode(first + lowDigit) + midpoint(low.slice(1), null);
}
