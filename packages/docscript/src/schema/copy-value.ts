/**
 * A deep copy of a stored value (null, booleans, numbers, strings, lists and records, as Loro holds
 * them) for a caller to keep: what `structuredClone` makes of such a value, at a fraction of its cost
 * for the small payloads a session hands back on every create. Own keys are copied as own keys (a
 * `__proto__` key stays a key, as `structuredClone` keeps it); a value of any other shape is left to
 * `structuredClone`.
 */
export function copyValue<Value>(value: Value): Value {
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) return value.map(copyValue) as Value;
  const prototype = Object.getPrototypeOf(value) as unknown;
  if (prototype !== Object.prototype && prototype !== null) return structuredClone(value);
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const item = copyValue((value as Record<string, unknown>)[key]);
    if (key === "__proto__")
      Object.defineProperty(copy, key, { value: item, enumerable: true, writable: true, configurable: true });
    else copy[key] = item;
  }
  return copy as Value;
}
