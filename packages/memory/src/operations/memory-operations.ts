/**
 * The memory API's operations, once: each one's arguments, answer, and whether it is a write that
 * runs once per idempotency key, or an operation by id that takes an identity's scope. The service
 * (`MemoryService`) and `MemoryClient` are both derived from this table, so an operation added to one
 * and not the other fails the typecheck.
 */
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

/**
 * One operation: `args` as the client takes them (the service takes the tenant first); `write`: the
 * client sends an `Idempotency-Key` and answers `WriteAnswer`; `scoped`: the call takes an
 * identity's scope last (the service's `scope`, the client's `options.scope`), and a record outside it
 * answers `not_found` exactly like a missing one (`MemoryError.notFound`).
 */
export interface MemoryOperation {
  readonly args: readonly unknown[];
  readonly response: unknown;
  readonly write: boolean;
  readonly scoped: boolean;
}

interface Read<Args extends readonly unknown[], Response> {
  readonly args: Args;
  readonly response: Response;
  readonly write: false;
  readonly scoped: false;
}
interface Write<Args extends readonly unknown[], Response> {
  readonly args: Args;
  readonly response: Response;
  readonly write: true;
  readonly scoped: false;
}
interface ScopedRead<Args extends readonly unknown[], Response> {
  readonly args: Args;
  readonly response: Response;
  readonly write: false;
  readonly scoped: true;
}
interface ScopedWrite<Args extends readonly unknown[], Response> {
  readonly args: Args;
  readonly response: Response;
  readonly write: true;
  readonly scoped: true;
}

export interface MemoryOperations {
  search: Read<[request: SearchRequest], SearchResponse>;
  add: Write<[request: AddMemoryRequest], AddMemoryResponse>;
  /** Many memories of one scope, checked like `add`, stored in one transaction. */
  addBatch: Write<[request: AddMemoriesRequest], AddMemoriesResponse>;
  writeEvent: Write<[request: WriteEventRequest], WriteEventResponse>;
  recallConversation: Read<[request: RecallConversationRequest], RecallConversationResponse>;
  ingestDocument: Write<[request: IngestDocumentRequest], IngestDocumentResponse>;
  searchKnowledge: Read<[request: SearchKnowledgeRequest], SearchKnowledgeResponse>;
  selfEdit: Write<[request: SelfEditRequest], SelfEditResponse>;
  getMemory: ScopedRead<[id: string], GetMemoryResponse>;
  /** A scope's memories, the latest written first, a page at a time (`nextCursor` continues). */
  listMemories: Read<[request: ListMemoriesRequest], ListMemoriesResponse>;
  updateMemory: ScopedWrite<[id: string, request: UpdateMemoryRequest], GetMemoryResponse>;
  /** Soft delete: the memory is kept in history with its reason. */
  deleteMemory: ScopedWrite<[id: string, request: { reason?: string }], GetMemoryResponse>;
  memoryHistory: ScopedRead<[id: string], MemoryHistoryResponse>;
  recordProcedureOutcome: ScopedWrite<
    [id: string, request: ProcedureOutcomeRequest],
    ProcedureOutcomeResponse
  >;
  recordFeedback: ScopedWrite<[id: string, request: FeedbackRequest], GetMemoryResponse>;
  profile: Read<[request: ScopeRequest], ProfileResponse>;
  contextBundle: Read<[request: ContextBundleRequest], ContextBundleResponse>;
  unifiedState: Read<[request: ScopeRequest], UnifiedStateResponse>;
  /** With a scope (an API key bound to one identity), the counts are that scope's. */
  status: ScopedRead<[], StatusResponse>;
  chainTrace: ScopedRead<[id: string], ChainTraceResponse>;
  noveltyScan: Write<[request: NoveltyScanRequest], NoveltyScanResponse>;
  consolidate: Write<[request: ConsolidateRequest], JobResponse>;
  importConversations: Write<[request: ImportConversationsRequest], JobResponse>;
  accessTrends: Read<[request: AccessTrendsRequest], AccessTrendsResponse>;
  accessSummaries: Read<[request: AccessSummariesRequest], AccessSummariesResponse>;
  listTraces: Read<[request: ListTracesRequest], ListTracesResponse>;
  getTrace: ScopedRead<[id: string], TraceResponse>;
  listJobs: Read<[request: ListJobsRequest], ListJobsResponse>;
  getJob: ScopedRead<[id: string], JobResponse>;
  /**
   * Deletes every record of a scope for good — memories, versions, events, documents, core blocks,
   * traces, jobs, access records and kept idempotency answers — and answers how many (ADR 0365).
   * Safe to repeat: a second purge deletes nothing more, so it is not a write-once call.
   */
  purge: Read<[request: PurgeRequest], PurgeResponse>;
}

/** An operation as the service takes it: the tenant first (from the API key), then its arguments. */
export type ServiceOperation<Operation extends MemoryOperation> = Operation["scoped"] extends true
  ? (tenantId: string, ...args: [...Operation["args"], scope?: MemoryScope]) => Promise<Operation["response"]>
  : (tenantId: string, ...args: Operation["args"]) => Promise<Operation["response"]>;

/** Every operation of the table as the service takes it. */
export type MemoryServiceOperations = {
  [Name in keyof MemoryOperations]: ServiceOperation<MemoryOperations[Name]>;
};

/** Per call: an abort signal and a timeout; writes an idempotency key; operations by id a scope. */
export interface ClientCallOptions {
  readonly signal?: AbortSignal;
  readonly timeoutMs?: number;
  readonly idempotencyKey?: string;
  readonly scope?: MemoryScope;
}

/** An operation as `MemoryClient` takes it: its arguments, then the call's options. */
export type ClientOperation<Operation extends MemoryOperation> = (
  ...args: [...Operation["args"], options?: ClientCallOptions]
) => Promise<
  Operation["write"] extends true
    ? Operation["response"] & { readonly replayed?: true }
    : Operation["response"]
>;

/** Every operation of the table as `MemoryClient` takes it. */
export type MemoryClientOperations = {
  [Name in keyof MemoryOperations]: ClientOperation<MemoryOperations[Name]>;
};
