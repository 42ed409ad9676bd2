/** @tackle/memory: long-term memory for agents — the service, its store, HTTP client and schemas. */
export {
  type CallOptions,
  DEFAULT_MEMORY_URL,
  MemoryClient,
  type MemoryClientOptions,
  type ScopedCallOptions,
  type ScopedWriteCallOptions,
  type WriteAnswer,
  type WriteCallOptions,
} from "./client/memory-client.ts";
export { isPrivateAddress } from "./client/ssrf-guard.ts";
export { MemoryError } from "./errors/memory-error.ts";
export { MemoryNetworkError } from "./errors/memory-network-error.ts";
export { MemoryTimeoutError } from "./errors/memory-timeout-error.ts";
export { SsrfRefusedError } from "./errors/ssrf-refused-error.ts";
export {
  type AccessSummariesRequest,
  type AccessSummariesResponse,
  type AccessTrendsRequest,
  type AccessTrendsResponse,
  accessSummariesRequestSchema,
  accessSummariesResponseSchema,
  accessTrendsRequestSchema,
  accessTrendsResponseSchema,
  type ConsolidateRequest,
  consolidateRequestSchema,
  type ImportConversationsRequest,
  importConversationsRequestSchema,
  JOB_STATUSES,
  JOB_TYPES,
  type JobResponse,
  jobResponseSchema,
  jobSchema,
  type ListJobsRequest,
  type ListJobsResponse,
  type ListTracesRequest,
  type ListTracesResponse,
  listJobsQuerySchema,
  listJobsResponseSchema,
  listTracesQuerySchema,
  listTracesResponseSchema,
  type MemoryJob,
  type NoveltyScanRequest,
  type NoveltyScanResponse,
  noveltyScanRequestSchema,
  noveltyScanResponseSchema,
  type RetrievalTrace,
  TRACE_OPERATIONS,
  type TraceResponse,
  traceResponseSchema,
  traceSchema,
} from "./schemas/admin.ts";
export { type ChainTraceResponse, chainTraceResponseSchema } from "./schemas/chain.ts";
export { type ErrorResponse, errorResponseSchema } from "./schemas/common.ts";
export {
  type CoreMemoryBlock,
  type CoreMemoryEdit,
  coreMemoryBlockSchema,
  coreMemoryEditSchema,
  DEFAULT_CORE_BLOCKS,
  type SelfEditRequest,
  type SelfEditResponse,
  selfEditRequestSchema,
  selfEditResponseSchema,
} from "./schemas/core-memory.ts";
export {
  EVENT_ROLES,
  eventSchema,
  type MemoryEvent,
  type RecallConversationRequest,
  type RecallConversationResponse,
  recallConversationRequestSchema,
  recallConversationResponseSchema,
  type WriteEventRequest,
  type WriteEventResponse,
  writeEventRequestSchema,
  writeEventResponseSchema,
} from "./schemas/event.ts";
export {
  documentSchema,
  type IngestDocumentRequest,
  type IngestDocumentResponse,
  ingestDocumentRequestSchema,
  ingestDocumentResponseSchema,
  type KnowledgeDocument,
  type SearchKnowledgeRequest,
  type SearchKnowledgeResponse,
  searchKnowledgeRequestSchema,
  searchKnowledgeResponseSchema,
} from "./schemas/knowledge.ts";
export {
  type AddMemoryRequest,
  type AddMemoryResponse,
  addMemoryRequestSchema,
  addMemoryResponseSchema,
  type FeedbackRequest,
  feedbackRequestSchema,
  type GetMemoryResponse,
  getMemoryResponseSchema,
  MEMORY_KINDS,
  MEMORY_STATUSES,
  type Memory,
  type MemoryHistoryResponse,
  type MemoryKind,
  type MemoryStatus,
  type MemoryVersion,
  memoryHistoryResponseSchema,
  memorySchema,
  type ProcedureOutcomeRequest,
  type ProcedureOutcomeResponse,
  type Provenance,
  procedureOutcomeRequestSchema,
  procedureOutcomeResponseSchema,
  type SearchRequest,
  type SearchResponse,
  searchRequestSchema,
  searchResponseSchema,
  type UpdateMemoryRequest,
  updateMemoryRequestSchema,
} from "./schemas/memory.ts";
export {
  type PurgeRequest,
  type PurgeResponse,
  purgeRequestSchema,
  purgeResponseSchema,
} from "./schemas/purge.ts";
export {
  type ContextBundleRequest,
  type ContextBundleResponse,
  contextBundleRequestSchema,
  contextBundleResponseSchema,
  type MemoryProfile,
  type ProfileResponse,
  profileResponseSchema,
  type ScopeRequest,
  type StatusResponse,
  scopeRequestSchema,
  statusResponseSchema,
  type UnifiedStateResponse,
  unifiedStateResponseSchema,
} from "./schemas/synthesis.ts";
export {
  MEMORY_SCOPE_VALUES,
  type MemoryScope,
  type MemoryScopeField,
  memoryScopeSchema,
  memoryScopeShape,
} from "./scope/memory-scope.ts";
export { createMemoryService, type MemoryServiceOptions } from "./service/create-memory-service.ts";
export type { MemoryEmbeddingModel } from "./service/embedder.ts";
export type { IdempotencyOptions } from "./service/idempotent-writes.ts";
export type { MemoryService } from "./service/memory-service.ts";
export type { MemoryStore } from "./store/memory-store.ts";
export { createSqliteStore, type SqliteStoreOptions } from "./store/sqlite/create-sqlite-store.ts";
// Tools and middlewares export below this line.

export type { MemoryMiddlewareCoreOptions } from "./middleware/create-memory-middleware-core.ts";
export type { MemoryContextMode, MemoryIdentity } from "./middleware/memory-identity.ts";
export type { MemoryMiddlewareErrorCode } from "./middleware/memory-middleware-error.ts";
export { MemoryMiddlewareError } from "./middleware/memory-middleware-error.ts";
export { createMemoryAdminTools } from "./tools/create-memory-admin-tools.ts";
export { createMemoryTools } from "./tools/create-memory-tools.ts";
export type { MemoryToolClient } from "./tools/memory-tool-client.ts";
