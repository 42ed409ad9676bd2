/**
 * Records keyed by names a caller chooses (node names, state keys): read and written as own keys only,
 * so a name like `toString`, `constructor` or `__proto__` is a key like any other — never an inherited
 * member read back, nor a prototype set instead of a key.
 */

/** The record's own value at `key`; undefined when it has none (whatever its prototype holds). */
export function ownValue<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

/** Sets `key` as an own, enumerable key (`__proto__` too: defined, not assigned). */
export function setOwn(record: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(record, key, { value, writable: true, enumerable: true, configurable: true });
}
