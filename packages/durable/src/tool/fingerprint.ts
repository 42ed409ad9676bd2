/** A stable fingerprint of a tool call's arguments: key order does not matter, every value does. */
import { createHash } from "node:crypto";
import { encodeValue, maxDepth, tooDeep } from "../codec/codec.ts";
import { DurableError } from "../errors/durable-error.ts";

const label = "the arguments";

export function fingerprint(value: unknown): string {
  return createHash("sha256")
    .update(encodeValue(sortKeys(value, new Set()), label))
    .digest("hex");
}

/**
 * The value with its plain objects' keys sorted. `seen` holds the objects on the way down, as in the
 * codec: a cycle or a value nested past the codec's bound is refused by name, not a stack overflow.
 */
function sortKeys(value: unknown, seen: Set<object>): unknown {
  if (value === null || typeof value !== "object") return value;
  const isArray = Array.isArray(value);
  if (!isArray && Object.getPrototypeOf(value) !== Object.prototype) return value;
  if (seen.has(value))
    throw new DurableError(
      "not_serializable",
      `Cannot journal ${label}: a circular reference does not survive a round-trip`,
      {
        data: { path: label },
      },
    );
  if (seen.size >= maxDepth) throw tooDeep(label);
  seen.add(value);
  try {
    if (isArray) return (value as unknown[]).map((item) => sortKeys(item, seen));
    // From entries, so a key "__proto__" is fingerprinted as a key, not set as the prototype and lost.
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, sortKeys((value as Record<string, unknown>)[key], seen)]),
    );
  } finally {
    seen.delete(value);
  }
}
