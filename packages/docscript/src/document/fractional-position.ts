/**
 * Order keys for ordered relations: strings that sort between their neighbours, so a move is one write
 * and concurrent inserts never renumber anyone. Equal keys (concurrent inserts at one spot) tie-break by id.
 * A key is the digits of a fraction in base 36 that never ends in "0".
 */
const digits = "0123456789abcdefghijklmnopqrstuvwxyz";
const base = digits.length;

/** A key strictly between `before` and `after` (either may be absent: the list's ends). */
export function positionBetween(before: string | undefined, after: string | undefined): string {
  return midpoint(before ?? "", after ?? null);
}

function midpoint(low: string, high: string | null): string {
  if (high !== null) {
    let shared = 0;
    while ((low[shared] ?? "0") === high[shared]) shared++;
    if (shared > 0) return high.slice(0, shared) + midpoint(low.slice(shared), high.slice(shared));
  }
  const lowDigit = low.length > 0 ? digits.indexOf(low[0] as string) : 0;
  const highDigit = high !== null && high.length > 0 ? digits.indexOf(high[0] as string) : base;
  if (highDigit - lowDigit > 1) return digits[Math.round((lowDigit + highDigit) / 2)] as string;
  if (high !== null && high.length > 1) return high.slice(0, 1);
  return (digits[lowDigit] as string) + midpoint(low.slice(1), null);
}
