/** Reversible names for model APIs, which accept `[A-Za-z0-9_-]{1,64}`: `module.tool` ↔ `module__tool`. */
import { createHash } from "node:crypto";

export const llmNamePattern = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The model-facing name of a tool. Dots become `__`; a name still longer than 64 characters keeps its
 * first 55 and gains a hash of the whole, so two long names never collide.
 */
export function toLlmName(name: string): string {
  const mapped = name.replaceAll(".", "__");
  if (mapped.length <= 64) return mapped;
  const digest = createHash("sha256").update(name).digest("hex").slice(0, 8);
  return `${mapped.slice(0, 55)}_${digest}`;
}
