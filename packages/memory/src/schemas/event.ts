/** Conversation events: append-only turns, idempotent by a caller's custom id. */
import { z } from "zod";
import { memoryScopeShape } from "../scope/memory-scope.ts";
import { idSchema, limitSchema, metadataInputSchema, metadataSchema, timestampSchema } from "./common.ts";
import { memorySchema } from "./memory.ts";

export const EVENT_ROLES = ["user", "assistant", "system", "tool"] as const;
export const eventRoleSchema = z.enum(EVENT_ROLES);

export const eventSchema = z.object({
  id: idSchema,
  customId: idSchema.optional(),
  role: eventRoleSchema,
  content: z.string(),
  ...memoryScopeShape,
  metadata: metadataSchema,
  source: z.enum(["api", "import"]),
  importJobId: idSchema.optional(),
  occurredAt: timestampSchema,
  createdAt: timestampSchema,
});
export type MemoryEvent = z.infer<typeof eventSchema>;

/** The longest text one event holds: longer turns are cut to it by the import and the capture middleware. */
export const EVENT_CONTENT_MAXIMUM = 32_000;

export const writeEventRequestSchema = z.object({
  ...memoryScopeShape,
  role: eventRoleSchema,
  content: z.string().min(1).max(EVENT_CONTENT_MAXIMUM),
  /** Retries with the same custom id store one event; the first write wins. */
  customId: idSchema.optional(),
  metadata: metadataInputSchema.optional(),
  occurredAt: z.iso.datetime({ offset: true }).optional(),
  /** Extract memories from a user turn (deterministic; first-person statements). */
  infer: z.boolean().default(true),
});
export type WriteEventRequest = z.input<typeof writeEventRequestSchema>;

export const writeEventResponseSchema = z.object({
  event: eventSchema,
  created: z.boolean(),
  memories: z.array(memorySchema),
});
export type WriteEventResponse = z.infer<typeof writeEventResponseSchema>;

export const recallConversationRequestSchema = z.object({
  ...memoryScopeShape,
  sessionId: memoryScopeShape.sessionId.unwrap(),
  limit: limitSchema(20, 200),
  /** `asc`: oldest first; `desc`: newest first. The cursor continues in the same direction. */
  order: z.enum(["asc", "desc"]).default("desc"),
  /** `nextCursor` of the previous page (an event id; the numbers older versions answered still work). */
  cursor: idSchema.optional(),
});
export type RecallConversationRequest = z.input<typeof recallConversationRequestSchema>;

export const recallConversationResponseSchema = z.object({
  events: z.array(eventSchema),
  nextCursor: z.string().optional(),
});
export type RecallConversationResponse = z.infer<typeof recallConversationResponseSchema>;
