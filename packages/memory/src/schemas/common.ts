/** Building blocks shared by the request and response schemas. */
import { z } from "zod";

export const idSchema = z.string().min(1).max(200);
export const timestampSchema = z.string().describe("ISO-8601 time");
export const metadataSchema = z.record(z.string(), z.unknown());

/**
 * What one call's metadata may hold: JSON values, nested at most `depth` levels, `entries` keys and
 * array items in all, `bytes` as JSON. A caller's legal call is bounded like any other: a million
 * keys or a million levels would cost the host seconds or its stack, not a small write.
 */
export const METADATA_LIMITS = { bytes: 16_384, depth: 8, entries: 1_000 } as const;

/** What a caller's JSON value may hold: `depth` levels, `entries` keys and array items in all, `bytes` as JSON. */
export interface JsonLimits {
  readonly bytes: number;
  readonly depth: number;
  readonly entries: number;
}

/**
 * Why `value` is not JSON within `limits`, or undefined; `subject` names it in the answer ("metadata").
 * Walks without recursion and stops at the first bound passed, so a hostile value costs about the
 * bounds' worth of work: arrays are read item by item, strings and keys counted as they are met, and
 * the value serialized only when their sum is already within `bytes` (an object's keys are listed
 * whole before they are counted: a caller pays to build them first).
 */
export function jsonProblem(value: unknown, limits: JsonLimits, subject: string): string | undefined {
  const pending: { value: unknown; depth: number }[] = [{ value, depth: 0 }];
  const tooLarge = (detail: string) => `${subject} is at most ${limits.bytes} bytes as JSON (${detail})`;
  const tooWide = () => `${subject} holds at most ${limits.entries} keys and array items in all`;
  let entries = 0;
  let characters = 0;
  while (pending.length > 0) {
    const item = pending.pop()!;
    const type = typeof item.value;
    // An undefined field is left out of the JSON stored, as an optional field a caller did not set.
    if (item.value == null || type === "boolean" || type === "number") continue;
    if (type === "string") {
      const { length } = item.value as string;
      if (length > limits.bytes) return tooLarge(`a string of ${length} characters`);
      characters += length;
      if (characters > limits.bytes)
        return tooLarge(`its text alone holds more than ${limits.bytes} characters`);
      continue;
    }
    if (type !== "object") return `${subject} holds only JSON values (found a value of type ${type})`;
    if (item.depth >= limits.depth) return `${subject} nests at most ${limits.depth} levels deep`;
    if (Array.isArray(item.value)) {
      // By index, so a wide array is refused at its item past the bound (its indices are not JSON text).
      const array = item.value as unknown[];
      for (let index = 0; index < array.length; index += 1) {
        entries += 1;
        if (entries > limits.entries) return tooWide();
        pending.push({ value: array[index], depth: item.depth + 1 });
      }
      continue;
    }
    for (const key of Object.keys(item.value as object)) {
      // JSON.parse makes "__proto__" an own key; copied into an object it would set the prototype
      // and vanish, so it is refused rather than dropped.
      if (key === "__proto__") return `${subject} may not use the key "__proto__"`;
      entries += 1;
      if (entries > limits.entries) return tooWide();
      characters += key.length;
      if (characters > limits.bytes)
        return tooLarge(`its text alone holds more than ${limits.bytes} characters`);
      pending.push({ value: (item.value as Record<string, unknown>)[key], depth: item.depth + 1 });
    }
  }
  // Bounded in depth, entries and the sum of its strings' lengths, so serializing it is cheap; its
  // UTF-8 length is counted, not encoded (an import's transcript is up to 4 MiB).
  const bytes = Buffer.byteLength(JSON.stringify(value) ?? "");
  if (bytes > limits.bytes) return tooLarge(`got ${bytes}`);
  return undefined;
}

/**
 * `schema`, checked first against `limits` with `jsonProblem`: before it is parsed (a parse walks every
 * item of a hostile value) or copied (a copy would already have lost a "__proto__" key). Typed as
 * `schema`, so a caller's TypeScript still checks what it passes.
 */
export function jsonWithin<T extends z.ZodType>(schema: T, limits: JsonLimits, subject: string): T {
  return z.preprocess((value, context) => {
    const problem =
      value !== null && typeof value === "object" ? jsonProblem(value, limits, subject) : undefined;
    if (problem !== undefined) context.addIssue({ code: "custom", message: problem, input: value });
    return value;
  }, schema) as unknown as T;
}

/** Metadata as a caller sends it: an object within `METADATA_LIMITS`. */
export const metadataInputSchema = jsonWithin(metadataSchema, METADATA_LIMITS, "metadata") as z.ZodType<
  Record<string, unknown>,
  Record<string, unknown>
>;

export const limitSchema = (fallback: number, maximum: number) =>
  z.coerce.number().int().min(1).max(maximum).default(fallback);

/** The body of every error answer: a coded error as data, never a stack. */
export const errorResponseSchema = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    retryable: z.boolean(),
    data: z.unknown().optional(),
  }),
});
export type ErrorResponse = z.infer<typeof errorResponseSchema>;
