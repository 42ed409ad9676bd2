/** Purge: hard deletion of everything a scope holds (ADR 0365). */
import { z } from "zod";
import { memoryScopeShape } from "../scope/memory-scope.ts";

/** The scope to purge: every field given must match, and at least one is given (never a whole tenant). */
export const purgeRequestSchema = z.object({ ...memoryScopeShape });
export type PurgeRequest = z.input<typeof purgeRequestSchema>;

const count = z.number().int();

export const purgeResponseSchema = z.object({
  scope: z.object({ ...memoryScopeShape }),
  /** How many records of each kind were deleted. */
  purged: z.object({
    memories: count,
    versions: count,
    events: count,
    documents: count,
    chunks: count,
    coreBlocks: count,
    traces: count,
    jobs: count,
    /** Access counts: one per day, kind, scope and memory (ADR 0537). */
    accessRecords: count,
    idempotencyKeys: count,
  }),
  purgedAt: z.string(),
});
export type PurgeResponse = z.infer<typeof purgeResponseSchema>;
