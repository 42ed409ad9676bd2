/** The memory service's operations; the HTTP API and `MemoryClient` expose exactly these. */
import type {
  AccessSummariesRequest,
  AccessSummariesResponse,
  AccessTrendsRequest,
  AccessTrendsResponse,
  ConsolidateRequest,
  ImportConversationsRequest,
  JobResponse,
  ListJobsRequest,
  ListJobsResponse,
  ListTracesRequest,
  ListTracesResponse,
  NoveltyScanRequest,
  NoveltyScanResponse,
  TraceResponse,
} from "../schemas/admin.ts";
import type { ChainTraceResponse } from "../schemas/chain.ts";
import type { SelfEditRequest, SelfEditResponse } from "../schemas/core-memory.ts";
import type {
  RecallConversationRequest,
  RecallConversationResponse,
  WriteEventRequest,
  WriteEventResponse,
} from "../schemas/event.ts";
import type {
  IngestDocumentRequest,
  IngestDocumentResponse,
  SearchKnowledgeRequest,
  SearchKnowledgeResponse,
} from "../schemas/knowledge.ts";
import type {
  AddMemoriesRequest,
  AddMemoriesResponse,
  AddMemoryRequest,
  AddMemoryResponse,
  FeedbackRequest,
  GetMemoryResponse,
  ListMemoriesRequest,
  ListMemoriesResponse,
  MemoryHistoryResponse,
  ProcedureOutcomeRequest,
  ProcedureOutcomeResponse,
  SearchRequest,
  SearchResponse,
  UpdateMemoryRequest,
} from "../schemas/memory.ts";
import type { PurgeRequest, PurgeResponse } from "../schemas/purge.ts";
import type {
  ContextBundleRequest,
  ContextBundleResponse,
  ProfileResponse,
  ScopeRequest,
  StatusResponse,
  UnifiedStateResponse,
} from "../schemas/synthesis.ts";
import type { MemoryScope } from "../scope/memory-scope.ts";
import type { RunOnce } from "./idempotent-writes.ts";

/** Every operation takes the tenant first (from the API key), then the request. */
export interface MemoryService {
  search(tenantId: string, request: SearchRequest): Promise<SearchResponse>;
  add(tenantId: string, request: AddMemoryRequest): Promise<AddMemoryResponse>;
  /** Many memories of one scope, checked like `add`, stored in one transaction. */
  addBatch(tenantId: string, request: AddMemoriesRequest): Promise<AddMemoriesResponse>;
  writeEvent(tenantId: string, request: WriteEventRequest): Promise<WriteEventResponse>;
  recallConversation(
    tenantId: string,
    request: RecallConversationRequest,
  ): Promise<RecallConversationResponse>;
  ingestDocument(tenantId: string, request: IngestDocumentRequest): Promise<IngestDocumentResponse>;
  searchKnowledge(tenantId: string, request: SearchKnowledgeRequest): Promise<SearchKnowledgeResponse>;
  selfEdit(tenantId: string, request: SelfEditRequest): Promise<SelfEditResponse>;
  /*
   * Operations on one memory by id take an optional scope: given, a memory outside it answers
   * `not_found` exactly like a missing one, so a caller acting for one identity cannot reach another's.
   */
  getMemory(tenantId: string, id: string, scope?: MemoryScope): Promise<GetMemoryResponse>;
  /** A scope's memories, the latest written first, a page at a time (`nextCursor` continues). */
  listMemories(tenantId: string, request: ListMemoriesRequest): Promise<ListMemoriesResponse>;
  updateMemory(
    tenantId: string,
    id: string,
    request: UpdateMemoryRequest,
    scope?: MemoryScope,
  ): Promise<GetMemoryResponse>;
  deleteMemory(
    tenantId: string,
    id: string,
    reason?: string,
    scope?: MemoryScope,
  ): Promise<GetMemoryResponse>;
  memoryHistory(tenantId: string, id: string, scope?: MemoryScope): Promise<MemoryHistoryResponse>;
  recordProcedureOutcome(
    tenantId: string,
    id: string,
    request: ProcedureOutcomeRequest,
    scope?: MemoryScope,
  ): Promise<ProcedureOutcomeResponse>;
  recordFeedback(
    tenantId: string,
    id: string,
    request: FeedbackRequest,
    scope?: MemoryScope,
  ): Promise<GetMemoryResponse>;
  profile(tenantId: string, request: ScopeRequest): Promise<ProfileResponse>;
  contextBundle(tenantId: string, request: ContextBundleRequest): Promise<ContextBundleResponse>;
  unifiedState(tenantId: string, request: ScopeRequest): Promise<UnifiedStateResponse>;
  /** With a scope (an API key bound to one identity), the counts are that scope's. */
  status(tenantId: string, scope?: MemoryScope): Promise<StatusResponse>;
  chainTrace(tenantId: string, id: string, scope?: MemoryScope): Promise<ChainTraceResponse>;
  noveltyScan(tenantId: string, request: NoveltyScanRequest): Promise<NoveltyScanResponse>;
  consolidate(tenantId: string, request: ConsolidateRequest): Promise<JobResponse>;
  importConversations(tenantId: string, request: ImportConversationsRequest): Promise<JobResponse>;
  accessTrends(tenantId: string, request: AccessTrendsRequest): Promise<AccessTrendsResponse>;
  accessSummaries(tenantId: string, request: AccessSummariesRequest): Promise<AccessSummariesResponse>;
  listTraces(tenantId: string, request: ListTracesRequest): Promise<ListTracesResponse>;
  getTrace(tenantId: string, id: string, scope?: MemoryScope): Promise<TraceResponse>;
  listJobs(tenantId: string, request: ListJobsRequest): Promise<ListJobsResponse>;
  getJob(tenantId: string, id: string, scope?: MemoryScope): Promise<JobResponse>;
  /**
   * Deletes every record of a scope for good — memories, versions, events, documents, core blocks,
   * traces, jobs, access records and kept idempotency answers — and answers how many (ADR 0365).
   */
  purge(tenantId: string, request: PurgeRequest): Promise<PurgeResponse>;
  /**
   * Runs a write once per tenant and idempotency key: a repeat of the same request answers the first
   * answer (`replayed: true`), another request under the key is refused (`idempotency_key_reused`),
   * and a repeat that arrives while the first runs waits for its answer (ADR 0356).
   */
  writeOnce: RunOnce;
  /** Waits for running jobs to finish, then closes the store. */
  close(): Promise<void>;
}
