/** Memories: the stored facts, preferences, episodes and procedures, with provenance and versions. */
import { z } from "zod";
import { memoryScopeShape, wholeTenantSchema } from "../scope/memory-scope.ts";
import { idSchema, limitSchema, metadataInputSchema, metadataSchema, timestampSchema } from "./common.ts";

export const MEMORY_KINDS = ["fact", "preference", "episode", "procedure", "summary"] as const;
export const memoryKindSchema = z.enum(MEMORY_KINDS);
export type MemoryKind = z.infer<typeof memoryKindSchema>;

/** `superseded`: merged into another memory; `archived`: decayed; `deleted`: soft-deleted. */
export const MEMORY_STATUSES = ["active", "superseded", "archived", "deleted"] as const;
export const memoryStatusSchema = z.enum(MEMORY_STATUSES);
export type MemoryStatus = z.infer<typeof memoryStatusSchema>;

export const PROVENANCE_SOURCES = ["api", "event", "import", "consolidation", "document"] as const;

/** Where a memory came from: the events, import job, document and memories it derives from. */
export const provenanceSchema = z.object({
  source: z.enum(PROVENANCE_SOURCES),
  eventIds: z.array(idSchema),
  importJobId: idSchema.optional(),
  documentId: idSchema.optional(),
  derivedFrom: z.array(idSchema),
});
export type Provenance = z.infer<typeof provenanceSchema>;

export const memorySchema = z.object({
  id: idSchema,
  kind: memoryKindSchema,
  content: z.string(),
  ...memoryScopeShape,
  metadata: metadataSchema,
  provenance: provenanceSchema,
  version: z.number().int(),
  status: memoryStatusSchema,
  supersededBy: idSchema.optional(),
  importance: z.number(),
  feedback: z.object({ helpful: z.number().int(), unhelpful: z.number().int() }),
  outcomes: z.object({ successes: z.number().int(), failures: z.number().int() }),
  accessCount: z.number().int(),
  lastAccessedAt: timestampSchema.optional(),
  createdAt: timestampSchema,
  updatedAt: timestampSchema,
});
export type Memory = z.infer<typeof memorySchema>;

const contentSchema = z.string().trim().min(1).max(8000);

export const addMemoryRequestSchema = z.object({
  ...memoryScopeShape,
  content: contentSchema,
  kind: memoryKindSchema.default("fact"),
  metadata: metadataInputSchema.optional(),
  importance: z.number().min(0).max(1).optional(),
  /** Events this memory was learned from; they appear in its chain trace. */
  eventIds: z.array(idSchema).max(100).optional(),
  /**
   * Refuse to store a memory already held in this scope (exact or near duplicate). Unset: on for facts,
   * preferences, procedures and summaries; off for episodes (a turn or event that happened is kept
   * with its own date and place even when its words repeat an earlier one).
   */
  dedupe: z.boolean().optional(),
});
export type AddMemoryRequest = z.input<typeof addMemoryRequestSchema>;

export const addMemoryResponseSchema = z.object({
  memory: memorySchema,
  created: z.boolean(),
  /** Set when the fact was already stored: the memory that holds it. */
  duplicateOf: idSchema.optional(),
  similarity: z.number().optional(),
});
export type AddMemoryResponse = z.infer<typeof addMemoryResponseSchema>;

/** Many memories of one scope, stored in one transaction (imports, bulk loads). */
export const addMemoriesRequestSchema = z.object({
  ...memoryScopeShape,
  memories: z
    .array(addMemoryRequestSchema.omit({ userId: true, agentId: true, sessionId: true }))
    .min(1)
    .max(1000),
});
export type AddMemoriesRequest = z.input<typeof addMemoriesRequestSchema>;

export const addMemoriesResponseSchema = z.object({ results: z.array(addMemoryResponseSchema) });
export type AddMemoriesResponse = z.infer<typeof addMemoriesResponseSchema>;

export const searchRequestSchema = z.object({
  ...memoryScopeShape,
  wholeTenant: wholeTenantSchema,
  query: z.string().trim().min(1).max(2000),
  limit: limitSchema(10, 100),
  kinds: z.array(memoryKindSchema).optional(),
});
export type SearchRequest = z.input<typeof searchRequestSchema>;

export const scoreComponentsSchema = z.object({
  bm25: z.number().optional(),
  vector: z.number().optional(),
  recency: z.number(),
  feedback: z.number(),
});

export const searchResultSchema = z.object({
  memory: memorySchema,
  score: z.number(),
  components: scoreComponentsSchema,
});

export const searchResponseSchema = z.object({
  traceId: idSchema,
  ranking: z.enum(["bm25", "fused"]),
  results: z.array(searchResultSchema),
});
export type SearchResponse = z.infer<typeof searchResponseSchema>;

export const memoryIdParamsSchema = z.object({ id: idSchema });

export const getMemoryResponseSchema = z.object({ memory: memorySchema });
export type GetMemoryResponse = z.infer<typeof getMemoryResponseSchema>;

export const updateMemoryRequestSchema = z.object({
  content: contentSchema.optional(),
  kind: memoryKindSchema.optional(),
  metadata: metadataInputSchema.optional(),
  importance: z.number().min(0).max(1).optional(),
  /** Optimistic concurrency: refuse with `conflict` unless the memory is still at this version. */
  expectedVersion: z.number().int().min(1).optional(),
  reason: z.string().max(500).optional(),
});
export type UpdateMemoryRequest = z.input<typeof updateMemoryRequestSchema>;

export const deleteMemoryQuerySchema = z.object({ reason: z.string().max(500).optional() });

export const HISTORY_CHANGES = [
  "create",
  "update",
  "delete",
  "merge",
  "supersede",
  "decay",
  "archive",
  "feedback",
  "outcome",
] as const;

export const memoryVersionSchema = z.object({
  version: z.number().int(),
  change: z.enum(HISTORY_CHANGES),
  kind: memoryKindSchema,
  content: z.string(),
  metadata: metadataSchema,
  status: memoryStatusSchema,
  importance: z.number(),
  reason: z.string().optional(),
  at: timestampSchema,
});
export type MemoryVersion = z.infer<typeof memoryVersionSchema>;

export const memoryHistoryResponseSchema = z.object({
  memoryId: idSchema,
  versions: z.array(memoryVersionSchema),
});
export type MemoryHistoryResponse = z.infer<typeof memoryHistoryResponseSchema>;

export const procedureOutcomeRequestSchema = z.object({
  success: z.boolean(),
  note: z.string().max(2000).optional(),
  eventId: idSchema.optional(),
});
export type ProcedureOutcomeRequest = z.input<typeof procedureOutcomeRequestSchema>;

export const procedureOutcomeResponseSchema = z.object({
  memory: memorySchema,
  successRate: z.number(),
});
export type ProcedureOutcomeResponse = z.infer<typeof procedureOutcomeResponseSchema>;

export const feedbackRequestSchema = z.object({
  rating: z.enum(["helpful", "unhelpful"]),
  traceId: idSchema.optional(),
  note: z.string().max(2000).optional(),
});
export type FeedbackRequest = z.input<typeof feedbackRequestSchema>;

/** The scope of a by-id operation or a listing, as query parameters: the shared scope fields. */
export const memoryScopeQuerySchema = z.object({ ...memoryScopeShape });

/**
 * `GET /v1/memories`: a scope's memories, the latest written first, a page at a time. Paging follows
 * write order, so memories added while a client pages appear before its first page, never inside it.
 */
export const listMemoriesQuerySchema = z.object({
  ...memoryScopeShape,
  wholeTenant: z
    .union([z.boolean(), z.enum(["true", "false"])])
    .optional()
    .describe("true: list every scope of the tenant; needed when no userId, agentId or sessionId is given"),
  kind: memoryKindSchema.optional(),
  status: memoryStatusSchema.default("active"),
  limit: limitSchema(20, 200),
  cursor: idSchema.optional().describe("The nextCursor of the previous page"),
});
export type ListMemoriesRequest = z.input<typeof listMemoriesQuerySchema>;
export const listMemoriesResponseSchema = z.object({
  memories: z.array(memorySchema),
  /** Present when more memories follow: send it as `cursor` for the next page. */
  nextCursor: idSchema.optional(),
});
export type ListMemoriesResponse = z.infer<typeof listMemoriesResponseSchema>;
