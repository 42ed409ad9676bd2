/** Jobs (import, consolidation, novelty scans), retrieval traces and access statistics. */
import { z } from "zod";
import { MEMORY_SCOPE_DESCRIPTIONS, memoryScopeShape, scopeIdSchema } from "../scope/memory-scope.ts";
import { chatgptConversationSchema, claudeConversationSchema } from "./chat-exports.ts";
import { idSchema, jsonWithin, limitSchema, timestampSchema } from "./common.ts";
import { memoryScopeQuerySchema, scoreComponentsSchema } from "./memory.ts";

export const JOB_TYPES = ["import", "consolidate", "novelty_scan"] as const;
export const JOB_STATUSES = ["queued", "running", "succeeded", "failed"] as const;

export const jobSchema = z.object({
  id: idSchema,
  type: z.enum(JOB_TYPES),
  status: z.enum(JOB_STATUSES),
  ...memoryScopeShape,
  input: z.unknown(),
  result: z.unknown().optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
  createdAt: timestampSchema,
  startedAt: timestampSchema.optional(),
  finishedAt: timestampSchema.optional(),
});
export type MemoryJob = z.infer<typeof jobSchema>;

export const jobResponseSchema = z.object({ job: jobSchema });
export type JobResponse = z.infer<typeof jobResponseSchema>;

export const listJobsQuerySchema = z.object({
  ...memoryScopeQuerySchema.shape,
  type: z.enum(JOB_TYPES).optional(),
  status: z.enum(JOB_STATUSES).optional(),
  limit: limitSchema(20, 200),
});
export type ListJobsRequest = z.input<typeof listJobsQuerySchema>;
export const listJobsResponseSchema = z.object({ jobs: z.array(jobSchema) });
export type ListJobsResponse = z.infer<typeof listJobsResponseSchema>;

export const noveltyScanRequestSchema = z.object({
  ...memoryScopeShape,
  candidates: z.array(z.string().trim().min(1).max(8000)).min(1).max(100),
  /** Similarity at or above which a candidate counts as already known. */
  threshold: z.number().min(0).max(1).default(0.8),
});
export type NoveltyScanRequest = z.input<typeof noveltyScanRequestSchema>;

export const noveltyScanResponseSchema = z.object({
  jobId: idSchema,
  results: z.array(
    z.object({
      content: z.string(),
      novel: z.boolean(),
      nearest: z.object({ memoryId: idSchema, content: z.string(), similarity: z.number() }).optional(),
    }),
  ),
});
export type NoveltyScanResponse = z.infer<typeof noveltyScanResponseSchema>;

export const consolidateRequestSchema = z.object({
  ...memoryScopeShape,
  /** Token similarity at or above which two memories of one kind and scope merge. */
  similarityThreshold: z.number().min(0.5).max(1).default(0.85),
  /** Memories neither accessed nor updated for this many days lose importance. */
  staleAfterDays: z.number().min(0).max(3650).default(90),
  decayFactor: z.number().min(0).max(1).default(0.5),
  /** Importance below which a decayed memory is archived (kept, with history, but not retrieved). */
  archiveBelow: z.number().min(0).max(1).default(0.1),
});
export type ConsolidateRequest = z.input<typeof consolidateRequestSchema>;

/**
 * What one import may carry, in process as over HTTP (where the body is at most 4 MiB): its
 * conversations at most 4 MiB as JSON, 16 levels deep and 200,000 keys and array items in all. A
 * message's fields past role, content and name are kept as sent (an export's `tool_calls`, times), so
 * they count too. A larger transcript is imported in several calls (`splitChatExport` splits an export).
 */
export const IMPORT_LIMITS = { bytes: 4_194_304, depth: 16, entries: 200_000 } as const;

const textPartSchema = z.object({ type: z.string(), text: z.string().optional() }).loose();
const messageContentSchema = z.union([z.string(), z.array(textPartSchema), z.null()]);

export const importMessageSchema = z
  .object({
    role: z.string().min(1).max(40),
    content: messageContentSchema,
  })
  .loose();

/**
 * Import formats: `openai`, chat-completions messages (system inline); `anthropic`, messages plus a
 * `system` field; `chatgpt-export` and `claude-export`, the conversations of a ChatGPT or Claude data
 * export's `conversations.json` as it writes them (ADR 0543).
 */
export const IMPORT_FORMATS = ["openai", "anthropic", "chatgpt-export", "claude-export"] as const;

const importShape = { ...memoryScopeShape, infer: z.boolean().default(true) };
const transcriptSubject = "an import's transcript";

/** An import of API-shaped transcripts (`openai`, `anthropic`). */
export const importTranscriptsRequestSchema = z.object({
  ...importShape,
  format: z.enum(["openai", "anthropic"]),
  conversations: jsonWithin(
    z
      .array(
        z.object({
          id: idSchema.optional(),
          sessionId: scopeIdSchema.optional().describe(MEMORY_SCOPE_DESCRIPTIONS.sessionId),
          system: messageContentSchema.optional(),
          messages: z.array(importMessageSchema).min(1).max(5000),
        }),
      )
      .min(1)
      .max(500),
    IMPORT_LIMITS,
    transcriptSubject,
  ),
});

const chatgptExportRequestSchema = z.object({
  ...importShape,
  format: z.literal("chatgpt-export"),
  conversations: jsonWithin(
    z.array(chatgptConversationSchema).min(1).max(500),
    IMPORT_LIMITS,
    transcriptSubject,
  ),
});

const claudeExportRequestSchema = z.object({
  ...importShape,
  format: z.literal("claude-export"),
  conversations: jsonWithin(
    z.array(claudeConversationSchema).min(1).max(500),
    IMPORT_LIMITS,
    transcriptSubject,
  ),
});

export const importConversationsRequestSchema = z.discriminatedUnion("format", [
  importTranscriptsRequestSchema,
  chatgptExportRequestSchema,
  claudeExportRequestSchema,
]);
export type ImportConversationsRequest = z.input<typeof importConversationsRequestSchema>;
export type ImportFormat = (typeof IMPORT_FORMATS)[number];

export const accessTrendsRequestSchema = z.object({
  ...memoryScopeShape,
  days: z.number().int().min(1).max(365).default(30),
});
export type AccessTrendsRequest = z.input<typeof accessTrendsRequestSchema>;

export const accessTrendsResponseSchema = z.object({
  days: z.array(
    z.object({
      day: z.string(),
      searches: z.number().int(),
      hits: z.number().int(),
      reads: z.number().int(),
    }),
  ),
});
export type AccessTrendsResponse = z.infer<typeof accessTrendsResponseSchema>;

export const accessSummariesRequestSchema = z.object({
  ...memoryScopeShape,
  limit: z.number().int().min(1).max(100).default(10),
});
export type AccessSummariesRequest = z.input<typeof accessSummariesRequestSchema>;

export const accessSummariesResponseSchema = z.object({
  totals: z.object({
    memories: z.number().int(),
    accessed: z.number().int(),
    neverAccessed: z.number().int(),
    searches: z.number().int(),
  }),
  top: z.array(
    z.object({
      memoryId: idSchema,
      content: z.string(),
      accessCount: z.number().int(),
      lastAccessedAt: timestampSchema.optional(),
    }),
  ),
});
export type AccessSummariesResponse = z.infer<typeof accessSummariesResponseSchema>;

export const TRACE_OPERATIONS = ["search", "knowledge_search", "context_bundle"] as const;

export const traceSchema = z.object({
  id: idSchema,
  operation: z.enum(TRACE_OPERATIONS),
  query: z.string(),
  ...memoryScopeShape,
  ranking: z.enum(["bm25", "fused"]),
  results: z.array(
    z.object({ id: idSchema, score: z.number(), components: scoreComponentsSchema.optional() }),
  ),
  durationMs: z.number(),
  createdAt: timestampSchema,
});
export type RetrievalTrace = z.infer<typeof traceSchema>;

export const listTracesQuerySchema = z.object({
  ...memoryScopeQuerySchema.shape,
  operation: z.enum(TRACE_OPERATIONS).optional(),
  limit: limitSchema(20, 200),
});
export type ListTracesRequest = z.input<typeof listTracesQuerySchema>;
export const listTracesResponseSchema = z.object({ traces: z.array(traceSchema) });
export type ListTracesResponse = z.infer<typeof listTracesResponseSchema>;
export const traceResponseSchema = z.object({ trace: traceSchema });
export type TraceResponse = z.infer<typeof traceResponseSchema>;
