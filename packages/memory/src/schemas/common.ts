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

/** Why `value` is not metadata a caller may send, or undefined. Walks without recursion. */
export function metadataProblem(value: unknown): string | undefined {
  const pending: { value: unknown; depth: number }[] = [{ value, depth: 0 }];
  let entries = 0;
  while (pending.length > 0) {
    const item = pending.pop()!;
    const type = typeof item.value;
    // An undefined field is left out of the JSON stored, as an optional field a caller did not set.
    if (item.value == null || type === "boolean" || type === "number") continue;
    if (type === "string") {
      const { length } = item.value as string;
      if (length > METADATA_LIMITS.bytes)
        return `metadata is at most ${METADATA_LIMITS.bytes} bytes as JSON (a string of ${length} characters)`;
      continue;
    }
    if (type !== "object") return `metadata holds only JSON values (found a value of type ${type})`;
    if (item.depth >= METADATA_LIMITS.depth)
      return `metadata nests at most ${METADATA_LIMITS.depth} levels deep`;
    for (const key of Object.keys(item.value as object)) {
      // JSON.parse makes "__proto__" an own key; copied into an object it would set the prototype
      // and vanish, so it is refused rather than dropped.
      if (key === "__proto__") return 'metadata may not use the key "__proto__"';
      entries += 1;
      if (entries > METADATA_LIMITS.entries)
        return `metadata holds at most ${METADATA_LIMITS.entries} keys and array items in all`;
      pending.push({ value: (item.value as Record<string, unknown>)[key], depth: item.depth + 1 });
    }
  }
  // Bounded in depth, entries and each string's length, so serializing it is cheap.
  const bytes = new TextEncoder().encode(JSON.stringify(value) ?? "").length;
  if (bytes > METADATA_LIMITS.bytes)
    return `metadata is at most ${METADATA_LIMITS.bytes} bytes as JSON (got ${bytes})`;
  return undefined;
}

/**
 * Metadata as a caller sends it: an object within `METADATA_LIMITS`, checked before it is copied (a
 * copy would already have lost a "__proto__" key). Typed as the record it accepts, so a caller's
 * TypeScript still checks what it passes.
 */
export const metadataInputSchema = z.preprocess((value, context) => {
  const problem = value !== null && typeof value === "object" ? metadataProblem(value) : undefined;
  if (problem !== undefined) context.addIssue({ code: "custom", message: problem, input: value });
  return value;
}, metadataSchema) as unknown as z.ZodType<Record<string, unknown>, Record<string, unknown>>;

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
