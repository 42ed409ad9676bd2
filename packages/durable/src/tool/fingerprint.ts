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
  const sorted: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort())
    sorted[key] = sortKeys((value as Record<string, unknown>)[key]);
  return sorted;
}
