/**
 * The text a keyed call's arguments are fingerprinted by (ADR 0210, 0218): their JSON with every
 * object's keys sorted, written without recursion.
 */

/**
 * `value`'s JSON with every object's keys sorted, written without recursion: a caller's arguments
 * nested 100,000 deep (well within a message) must not overflow the stack and be mistaken for an
 * unreachable ledger. The text is the one `JSON.stringify` gives of the value rebuilt with sorted keys
 * (so nodes of another version agree on a key's fingerprint).
 */
export function canonicalJson(value: unknown): string {
  const parts: string[] = [];
  /** What is left to write, last first: a value, or text as it stands. */
  const work: { readonly value?: unknown; readonly text?: string }[] = [{ value }];
  for (let item = work.pop(); item !== undefined; item = work.pop()) {
    if (item.text !== undefined) {
      parts.push(item.text);
      continue;
    }
    const current = item.value;
    if (Array.isArray(current)) {
      work.push({ text: "]" });
      for (let index = current.length - 1; index >= 0; index -= 1) {
        const element: unknown = current[index];
        // As JSON.stringify: what JSON cannot hold is null in an array.
        work.push(writable(element) ? { value: element } : { text: "null" });
        if (index > 0) work.push({ text: "," });
      }
      work.push({ text: "[" });
    } else if (typeof current === "object" && current !== null) {
      // As JSON.stringify: a property JSON cannot hold is left out.
      const names = ordered(Object.keys(current)).filter((name) =>
        writable((current as Record<string, unknown>)[name]),
      );
      work.push({ text: "}" });
      for (let index = names.length - 1; index >= 0; index -= 1) {
        const name = names[index] as string;
        work.push({ value: (current as Record<string, unknown>)[name] });
        work.push({ text: `${index > 0 ? "," : ""}${JSON.stringify(name)}:` });
      }
      work.push({ text: "{" });
    } else parts.push(JSON.stringify(current) ?? "null");
  }
  return parts.join("");
}

/**
 * Sorted keys in the order an object rebuilt from them enumerates them (what the ledger's fingerprint
 * always wrote): array-index keys first, in numeric order, then the others as sorted.
 */
function ordered(names: string[]): string[] {
  const sorted = names.sort();
  const indices = sorted.filter(isArrayIndex);
  if (indices.length === 0) return sorted;
  return [
    ...indices.sort((left, right) => Number(left) - Number(right)),
    ...sorted.filter((name) => !isArrayIndex(name)),
  ];
}

function isArrayIndex(name: string): boolean {
  return /^(?:0|[1-9][0-9]{0,9})$/.test(name) && Number(name) < 2 ** 32 - 1;
}

function writable(value: unknown): boolean {
  return value !== undefined && typeof value !== "function" && typeof value !== "symbol";
}
