/** Profile, context bundle, unified state and status: views synthesized from the store. */
import { z } from "zod";
import { memoryScopeShape, wholeTenantSchema } from "../scope/memory-scope.ts";
import { idSchema, timestampSchema } from "./common.ts";
import { coreMemoryBlockSchema } from "./core-memory.ts";
import { eventSchema } from "./event.ts";
import { memoryKindSchema, memorySchema } from "./memory.ts";

export const scopeRequestSchema = z.object({ ...memoryScopeShape, wholeTenant: wholeTenantSchema });
export type ScopeRequest = z.input<typeof scopeRequestSchema>;

export const profileSchema = z.object({
  summary: z.string(),
  preferences: z.array(z.string()),
  facts: z.array(z.string()),
  procedures: z.array(z.string()),
  memoryIds: z.array(idSchema),
  /** `deterministic` unless a language model was configured and answered. */
  generatedBy: z.enum(["deterministic", "language_model"]),
});
export type MemoryProfile = z.infer<typeof profileSchema>;

export const profileResponseSchema = z.object({ profile: profileSchema });
export type ProfileResponse = z.infer<typeof profileResponseSchema>;

export const contextBundleRequestSchema = z.object({
  ...memoryScopeShape,
  wholeTenant: wholeTenantSchema,
  query: z.string().trim().min(1).max(2000).optional(),
  /** Estimated tokens (characters / 4) the whole bundle may use. */
  tokenBudget: z.number().int().min(50).max(32000).default(1200),
  maxMemories: z.number().int().min(0).max(50).default(10),
  maxEvents: z.number().int().min(0).max(50).default(8),
});
export type ContextBundleRequest = z.input<typeof contextBundleRequestSchema>;

export const contextBundleResponseSchema = z.object({
  profile: profileSchema,
  coreMemory: z.array(coreMemoryBlockSchema),
  memories: z.array(
    z.object({
      id: idSchema,
      kind: memoryKindSchema,
      content: z.string(),
      score: z.number(),
      createdAt: timestampSchema,
    }),
  ),
  recentEvents: z.array(
    z.object({
      id: idSchema,
      role: z.string(),
      content: z.string(),
      sessionId: z.string().optional(),
      occurredAt: timestampSchema,
    }),
  ),
  tokenEstimate: z.number().int(),
  tokenBudget: z.number().int(),
  /** True when something was left out to stay within the budget. */
  truncated: z.boolean(),
  traceId: idSchema.optional(),
});
export type ContextBundleResponse = z.infer<typeof contextBundleResponseSchema>;

export const memoryCountsSchema = z.object({
  active: z.number().int(),
  superseded: z.number().int(),
  archived: z.number().int(),
  deleted: z.number().int(),
  byKind: z.record(z.string(), z.number().int()),
});
export type MemoryCounts = z.infer<typeof memoryCountsSchema>;

export const unifiedStateResponseSchema = z.object({
  coreMemory: z.array(coreMemoryBlockSchema),
  counts: z.object({ memories: memoryCountsSchema, events: z.number().int(), documents: z.number().int() }),
  recentMemories: z.array(memorySchema),
  recentEvents: z.array(eventSchema),
  activeJobs: z.array(z.object({ id: idSchema, type: z.string(), status: z.string() })),
});
export type UnifiedStateResponse = z.infer<typeof unifiedStateResponseSchema>;

/** The kinds `status` answers in `quotas`: the counters (ADRs 0538, 0556), then what is counted from rows (ADR 0551). */
const quotaKinds = [
  "memories",
  "memoryBytes",
  "events",
  "eventBytes",
  "documentBytes",
  "metadataBytes",
  "coreBlocks",
  "coreBlockBytes",
  "queuedJobs",
] as const;

export const statusResponseSchema = z.object({
  ok: z.boolean(),
  version: z.string(),
  store: z.enum(["sqlite", "postgres"]),
  retrieval: z.enum(["bm25", "fused"]),
  embeddingModel: z.string().optional(),
  languageModel: z.string().optional(),
  tenant: z.string(),
  counts: z.object({
    memories: z.number().int(),
    events: z.number().int(),
    documents: z.number().int(),
    traces: z.number().int(),
    jobs: z.number().int(),
  }),
  /**
   * The tenant's storage against its quotas (ADRs 0538, 0551, 0556), tenant-wide whatever the scope:
   * `limit` null when switched off.
   */
  quotas: z
    .object(
      Object.fromEntries(
        quotaKinds.map((kind) => [
          kind,
          z.object({ used: z.number().int(), limit: z.number().int().nullable() }),
        ]),
      ) as Record<
        (typeof quotaKinds)[number],
        z.ZodObject<{ used: z.ZodNumber; limit: z.ZodNullable<z.ZodNumber> }>
      >,
    )
    .optional(),
  uptimeSeconds: z.number(),
});
export type StatusResponse = z.infer<typeof statusResponseSchema>;
