/** Knowledge base: documents split into chunks, searched by BM25 (and vectors when configured). */
import { z } from "zod";
import { memoryScopeShape, wholeTenantSchema } from "../scope/memory-scope.ts";
import { idSchema, limitSchema, metadataInputSchema, metadataSchema, timestampSchema } from "./common.ts";

export const documentSchema = z.object({
  id: idSchema,
  title: z.string(),
  source: z.string().optional(),
  ...memoryScopeShape,
  metadata: metadataSchema,
  contentHash: z.string(),
  chunkCount: z.number().int(),
  createdAt: timestampSchema,
});
export type KnowledgeDocument = z.infer<typeof documentSchema>;

export const ingestDocumentRequestSchema = z.object({
  ...memoryScopeShape,
  title: z.string().trim().min(1).max(500),
  content: z.string().min(1).max(2_000_000),
  source: z.string().max(2000).optional(),
  metadata: metadataInputSchema.optional(),
  /** Target chunk length in characters; chunks break at paragraph and sentence ends. */
  chunkSize: z.number().int().min(200).max(8000).default(1200),
});
export type IngestDocumentRequest = z.input<typeof ingestDocumentRequestSchema>;

export const ingestDocumentResponseSchema = z.object({
  document: documentSchema,
  /** False when the same content was already ingested in this scope. */
  created: z.boolean(),
});
export type IngestDocumentResponse = z.infer<typeof ingestDocumentResponseSchema>;

export const searchKnowledgeRequestSchema = z.object({
  ...memoryScopeShape,
  wholeTenant: wholeTenantSchema,
  query: z.string().trim().min(1).max(2000),
  limit: limitSchema(5, 50),
});
export type SearchKnowledgeRequest = z.input<typeof searchKnowledgeRequestSchema>;

export const searchKnowledgeResponseSchema = z.object({
  traceId: idSchema,
  results: z.array(
    z.object({
      chunkId: idSchema,
      documentId: idSchema,
      title: z.string(),
      source: z.string().optional(),
      ordinal: z.number().int(),
      content: z.string(),
      score: z.number(),
    }),
  ),
});
export type SearchKnowledgeResponse = z.infer<typeof searchKnowledgeResponseSchema>;
