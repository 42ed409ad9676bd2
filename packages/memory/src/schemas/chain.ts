/** Chain trace: a memory's provenance back to the events, imports and memories it came from. */
import { z } from "zod";
import { jobSchema } from "./admin.ts";
import { eventSchema } from "./event.ts";
import { documentSchema } from "./knowledge.ts";
import { memorySchema, memoryVersionSchema } from "./memory.ts";

export const chainTraceResponseSchema = z.object({
  memory: memorySchema,
  versions: z.array(memoryVersionSchema),
  events: z.array(eventSchema),
  /** Memories this one was merged or derived from (one level, with their own provenance inside). */
  derivedFrom: z.array(memorySchema),
  importJob: jobSchema.optional(),
  document: documentSchema.optional(),
});
export type ChainTraceResponse = z.infer<typeof chainTraceResponseSchema>;
