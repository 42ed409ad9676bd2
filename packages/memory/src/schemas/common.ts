/** Building blocks shared by the request and response schemas. */
import { z } from "zod";

export const idSchema = z.string().min(1).max(200);
export const timestampSchema = z.string().describe("ISO-8601 time");
export const metadataSchema = z.record(z.string(), z.unknown());
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
