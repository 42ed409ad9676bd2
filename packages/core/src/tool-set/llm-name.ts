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

/** Dots to `__`, at the type level. */
type DotsToUnderscores<Name extends string> = Name extends `${infer Head}.${infer Tail}`
  ? `${Head}__${DotsToUnderscores<Tail>}`
  : Name;

/** True when `Text` has more than `Limit` characters (counted up to `Limit + 1`). */
type LongerThan<
  Text extends string,
  Limit extends number,
  Seen extends unknown[] = [],
> = Seen["length"] extends Limit
  ? Text extends ""
    ? false
    : true
  : Text extends `${string}${infer Rest}`
    ? LongerThan<Rest, Limit, [...Seen, unknown]>
    : false;

/**
 * `toLlmName` at the type level: `"orders.get"` → `"orders__get"`. A name whose mapped form is longer
 * than 64 characters gains a hash no type can compute, so it is just `string`.
 */
export type LlmName<Name extends string> = string extends Name
  ? string
  : LongerThan<DotsToUnderscores<Name>, 64> extends true
    ? string
    : DotsToUnderscores<Name>;
