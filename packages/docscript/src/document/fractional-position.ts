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
  try {
    return generateKeyBetween(before ?? null, after ?? null);
  } catch {
    // A neighbour the library does not read (a key written before ADR 0476) or equal neighbours.
    return midpoint(before ?? "", after ?? null);
  }
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
