/**
 * @tackle/memory: long-term memory for agents — the service, its store, HTTP client, tools, middleware
 * and the API's types. The wire schemas (zod) are under `@tackle/memory/schemas`.
 */

export type { ImportExportOptions } from "./client/import-export.ts";
export {
  type CallOptions,
  DEFAULT_MEMORY_URL,
  type ImportExportRequest,
  MemoryClient,
  type MemoryClientOptions,
  type ScopedCallOptions,
  type ScopedWriteCallOptions,
  type WriteAnswer,
  type WriteCallOptions,
} from "./client/memory-client.ts";
export { type ChatExportFormat, splitChatExport } from "./client/split-chat-export.ts";
export { isPrivateAddress } from "./client/ssrf-guard.ts";
export { MemoryError } from "./errors/memory-error.ts";
export { MemoryNetworkError } from "./errors/memory-network-error.ts";
export { MemoryTimeoutError } from "./errors/memory-timeout-error.ts";
export { SsrfRefusedError } from "./errors/ssrf-refused-error.ts";
export type { MemoryClientOperations, MemoryOperations } from "./operations/memory-operations.ts";
export type {
  AccessSummariesRequest,
  AccessSummariesResponse,
  AccessTrendsRequest,
  AccessTrendsResponse,
  ConsolidateRequest,
  ImportConversationsRequest,
  ImportFormat,
  JobResponse,
  ListJobsRequest,
  ListJobsResponse,
  ListTracesRequest,
  ListTracesResponse,
  MemoryJob,
  NoveltyScanRequest,
  NoveltyScanResponse,
  RetrievalTrace,
  TraceResponse,
} from "./schemas/admin.ts";
export type { ChainTraceResponse } from "./schemas/chain.ts";
export type { ErrorResponse } from "./schemas/common.ts";
export type {
  CoreMemoryBlock,
  CoreMemoryEdit,
  SelfEditRequest,
  SelfEditResponse,
} from "./schemas/core-memory.ts";
export type {
  MemoryEvent,
  RecallConversationRequest,
  RecallConversationResponse,
  WriteEventRequest,
  WriteEventResponse,
} from "./schemas/event.ts";
export type {
  IngestDocumentRequest,
  IngestDocumentResponse,
  KnowledgeDocument,
  SearchKnowledgeRequest,
  SearchKnowledgeResponse,
} from "./schemas/knowledge.ts";
export type {
  AddMemoryRequest,
  AddMemoryResponse,
  FeedbackRequest,
  GetMemoryResponse,
  ListMemoriesRequest,
  ListMemoriesResponse,
  Memory,
  MemoryHistoryResponse,
  MemoryKind,
  MemoryStatus,
  MemoryVersion,
  ProcedureOutcomeRequest,
  ProcedureOutcomeResponse,
  Provenance,
  SearchRequest,
  SearchResponse,
  UpdateMemoryRequest,
} from "./schemas/memory.ts";
export type { PurgeRequest, PurgeResponse } from "./schemas/purge.ts";
export type {
  ContextBundleRequest,
  ContextBundleResponse,
  MemoryProfile,
  ProfileResponse,
  ScopeRequest,
  StatusResponse,
  UnifiedStateResponse,
} from "./schemas/synthesis.ts";
export type { MemoryScope, MemoryScopeField } from "./scope/memory-scope.ts";
export { createMemoryService, type MemoryServiceOptions } from "./service/create-memory-service.ts";
export type { MemoryEmbeddingModel } from "./service/embedder.ts";
export type { IdempotencyOptions } from "./service/idempotent-writes.ts";
export type { MemoryService } from "./service/memory-service.ts";
export type { MemoryQuotaOptions } from "./service/quotas.ts";
export type { MemoryRetentionOptions } from "./service/retention.ts";
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
