/**
 * Schema lookups by own keys only: a name a script or a push chose ("constructor", "__proto__",
 * "toString") must never find something a plain object inherits.
 */
export { ownValue } from "@tackle/core/internal";

/** True when `key` is the record's own property. */
export function hasOwnKey(record: object | undefined, key: unknown): boolean {
  return record !== undefined && typeof key === "string" && Object.hasOwn(record, key);
}

/**
 * True for a record read from JSON or Loro that holds only own keys: a map key named `__proto__` read
 * through `toJSON` becomes the object's prototype instead of a key, hiding what it holds from a check.
 */
export function isPlainRecord(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

/** A copy of `record` without a prototype, so `in` and `[]` see its own keys only. */
export function nullPrototype<Value>(record: Readonly<Record<string, Value>>): Record<string, Value> {
  const copy = Object.create(null) as Record<string, Value>;
  for (const [key, value] of Object.entries(record)) copy[key] = value;
  return copy;
}
