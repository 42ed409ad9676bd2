/**
 * Records keyed by names a caller chooses (node names, state keys, schema fields, tool names): read and
 * written as own keys only, so `toString`, `constructor` or `__proto__` is a key like any other — never
 * an inherited member read back, nor a prototype set instead of a key.
 */

/** `record[key]` when `key` is the record's own property, else `undefined` (whatever its prototype holds). */
export function ownValue<Value>(
  record: Readonly<Record<string, Value>> | undefined,
  key: unknown,
): Value | undefined {
  if (record === undefined || typeof key !== "string" || !Object.hasOwn(record, key)) return undefined;
  return record[key];
}

/** Sets `key` as an own, enumerable key (`__proto__` too: defined, not assigned). */
export function setOwn(record: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(record, key, { value, writable: true, enumerable: true, configurable: true });
}
