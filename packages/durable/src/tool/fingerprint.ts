/** A stable fingerprint of a tool call's arguments: key order does not matter, every value does. */
import { createHash } from "node:crypto";
import { encodeValue } from "../codec/codec.ts";

export function fingerprint(value: unknown): string {
  return createHash("sha256")
    .update(encodeValue(sortKeys(value), "the arguments"))
    .digest("hex");
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== "object" || Object.getPrototypeOf(value) !== Object.prototype)
    return value;
  // From entries, so a key "__proto__" is fingerprinted as a key, not set as the prototype and lost.
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, sortKeys((value as Record<string, unknown>)[key])]),
  );
}
