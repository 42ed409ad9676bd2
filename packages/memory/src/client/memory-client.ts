/**
 * `MemoryClient`: the one way to talk to the memory service. It owns auth, retries with jittered
 * backoff on 429 and 5xx (and lost connections), timeouts, typed errors and the SSRF guard.
 */
import { randomUUID } from "node:crypto";
import { ToolAbortedError } from "@tackle/core";
import type { z } from "zod";
import { MemoryError, type MemoryErrorCode } from "../errors/memory-error.ts";
import { MemoryTimeoutError } from "../errors/memory-timeout-error.ts";
import type { MemoryClientOperations, MemoryOperations } from "../operations/memory-operations.ts";
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
  MemoryJob,
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
import { type MemoryRoute, memoryRoutes } from "../server/routes.ts";
import { checkIdempotencyKey } from "../service/idempotent-writes.ts";
import { parseRequest } from "../service/parse-request.ts";
import { checkHeaders } from "./header-checks.ts";
import { sendRequest } from "./http-transport.ts";
import { type ImportExportOptions, importExport } from "./import-export.ts";
import { notifyScopePurged } from "./purge-notices.ts";
import type { ChatExportFormat } from "./split-chat-export.ts";
import { checkUrl } from "./ssrf-guard.ts";

/** Where the local default service listens (`tackle-memory serve` without `--listen`). */
export const DEFAULT_MEMORY_URL = "http://127.0.0.1:4280";

export interface MemoryClientOptions {
  /**
   * Default: TACKLE_MEMORY_URL (several comma-separated), else the local default service (whose
   * loopback is then allowed). Several URLs: services sharing one store; a retryable failure (a lost
   * connection, a timeout, 429/5xx) moves the call, and the calls after it, to the next URL.
   */
  readonly baseUrl?: string | readonly string[];
  /** Default: TACKLE_MEMORY_API_KEY. Sent as `Authorization: Bearer`. */
  readonly apiKey?: string;
  /** Per attempt (default 10 000 ms). */
  readonly timeoutMs?: number;
  /** Retries after the first attempt on 429, 5xx, timeouts and lost connections (default 3). */
  readonly maxRetries?: number;
  /** First backoff ceiling; each retry doubles it, capped at 5 s, and waits a random part of it. */
  readonly retryBaseMs?: number;
  /** Allow private, loopback and link-local addresses (default: only for the local default URL). */
  readonly allowPrivateNetwork?: boolean;
  readonly headers?: Readonly<Record<string, string>>;
}

export interface CallOptions {
  /**
   * Aborting rejects the call with `aborted` (`ToolAbortedError`) at once and closes its connection; a
   * signal aborted before the call sends nothing.
   */
  readonly signal?: AbortSignal;
  /** Per attempt; default the client's `timeoutMs`. */
  readonly timeoutMs?: number;
}

/** For operations on one memory by id: with `scope`, a memory outside it answers `not_found`. */
export interface ScopedCallOptions extends CallOptions {
  readonly scope?: MemoryScope;
}

/** A data export to import with `importExport`: its format, its `conversations.json`, the scope. */
export type ImportExportRequest = Omit<
  Extract<ImportConversationsRequest, { format: "claude-export" }>,
  "format" | "conversations"
> & {
  readonly format: ChatExportFormat;
  /** The export's `conversations.json`: its text, or the parsed array. */
  readonly export: unknown;
};

/** For writes: every attempt of one call (its retries) carries one `Idempotency-Key`, so the write is done once. */
export interface WriteCallOptions extends CallOptions {
  /** Default: a random UUID per call. Pass your own to make a write once across calls (and processes). */
  readonly idempotencyKey?: string;
}

export interface ScopedWriteCallOptions extends ScopedCallOptions, WriteCallOptions {}

/** A write's answer; `replayed` when the service had already done this write and answers its first answer. */
export type WriteAnswer<T> = T & { readonly replayed?: true };

const routesById = new Map(memoryRoutes.map((route) => [route.operationId, route]));
const maximumBackoffMs = 5000;

/**
 * Every operation of `MemoryOperations`, as the service offers it: a method added to the client and
 * not to the table (so not to the service) fails the typecheck here, unless it is one of these.
 */
const clientOnly: Record<Exclude<keyof MemoryClient, keyof MemoryOperations>, true> = {
  baseUrl: true,
  importExport: true,
  waitForJob: true,
};
void clientOnly;

export class MemoryClient implements MemoryClientOperations {
  /** The URL the next call goes to first (the first given, until a failover). */
  get baseUrl(): string {
    return this.#baseUrls[this.#current] as string;
  }
  readonly #baseUrls: readonly string[];
  #current = 0;
  readonly #apiKey: string | undefined;
  readonly #timeoutMs: number;
  readonly #maxRetries: number;
  readonly #retryBaseMs: number;
  readonly #allowPrivateNetwork: boolean;
  readonly #headers: Readonly<Record<string, string>>;

  constructor(options: MemoryClientOptions = {}) {
    const configured = options.baseUrl ?? process.env.TACKLE_MEMORY_URL;
    const given =
      typeof configured === "string" ? configured.split(",") : (configured ?? [DEFAULT_MEMORY_URL]);
    this.#baseUrls = given.map((url) => url.trim().replace(/\/+$/, "")).filter((url) => url !== "");
    if (this.#baseUrls.length === 0) this.#baseUrls = [DEFAULT_MEMORY_URL];
    this.#apiKey = options.apiKey ?? process.env.TACKLE_MEMORY_API_KEY;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#maxRetries = options.maxRetries ?? 3;
    this.#retryBaseMs = options.retryBaseMs ?? 200;
    this.#allowPrivateNetwork = options.allowPrivateNetwork ?? configured === undefined;
    this.#headers = options.headers ?? {};
    checkHeaders(this.#apiKey, this.#headers);
    for (const url of this.#baseUrls) checkUrl(new URL(url), this.#allowPrivateNetwork);
  }

  search(request: SearchRequest, options?: CallOptions): Promise<SearchResponse> {
    return this.#call("search", { body: request }, options);
  }
  add(request: AddMemoryRequest, options?: WriteCallOptions): Promise<WriteAnswer<AddMemoryResponse>> {
    return this.#call("add", { body: request }, options);
  }
  /** Many memories of one scope in one transaction; each answer like `add`'s, in order. */
  addBatch(
    request: AddMemoriesRequest,
    options?: WriteCallOptions,
  ): Promise<WriteAnswer<AddMemoriesResponse>> {
    return this.#call("addBatch", { body: request }, options);
  }
  /**
   * Without a `customId`, the call's idempotency key is the event's custom id: one event however often
   * the call is retried, and after the key expired too.
   */
  writeEvent(
    request: WriteEventRequest,
    options: WriteCallOptions = {},
  ): Promise<WriteAnswer<WriteEventResponse>> {
    const idempotencyKey = options.idempotencyKey ?? randomUUID();
    return this.#call(
      "writeEvent",
      { body: { ...request, customId: request.customId ?? idempotencyKey } },
      { ...options, idempotencyKey },
    );
  }
  recallConversation(
    request: RecallConversationRequest,
    options?: CallOptions,
  ): Promise<RecallConversationResponse> {
    return this.#call("recallConversation", { body: request }, options);
  }
  ingestDocument(
    request: IngestDocumentRequest,
    options?: WriteCallOptions,
  ): Promise<WriteAnswer<IngestDocumentResponse>> {
    return this.#call("ingestDocument", { body: request }, options);
  }
  searchKnowledge(request: SearchKnowledgeRequest, options?: CallOptions): Promise<SearchKnowledgeResponse> {
    return this.#call("searchKnowledge", { body: request }, options);
  }
  selfEdit(request: SelfEditRequest, options?: WriteCallOptions): Promise<WriteAnswer<SelfEditResponse>> {
    return this.#call("selfEdit", { body: request }, options);
  }
  getMemory(id: string, options?: ScopedCallOptions): Promise<GetMemoryResponse> {
    return this.#call("getMemory", { id, query: { ...options?.scope } }, options);
  }
  updateMemory(
    id: string,
    request: UpdateMemoryRequest,
    options?: ScopedWriteCallOptions,
  ): Promise<WriteAnswer<GetMemoryResponse>> {
    return this.#call("updateMemory", { id, body: request, query: { ...options?.scope } }, options);
  }
  deleteMemory(
    id: string,
    request: { reason?: string } = {},
    options?: ScopedWriteCallOptions,
  ): Promise<WriteAnswer<GetMemoryResponse>> {
    return this.#call("deleteMemory", { id, query: { ...request, ...options?.scope } }, options);
  }
  memoryHistory(id: string, options?: ScopedCallOptions): Promise<MemoryHistoryResponse> {
    return this.#call("memoryHistory", { id, query: { ...options?.scope } }, options);
  }
  chainTrace(id: string, options?: ScopedCallOptions): Promise<ChainTraceResponse> {
    return this.#call("chainTrace", { id, query: { ...options?.scope } }, options);
  }
  recordProcedureOutcome(
    id: string,
    request: ProcedureOutcomeRequest,
    options?: ScopedWriteCallOptions,
  ): Promise<WriteAnswer<ProcedureOutcomeResponse>> {
    return this.#call("recordProcedureOutcome", { id, body: request, query: { ...options?.scope } }, options);
  }
  recordFeedback(
    id: string,
    request: FeedbackRequest,
    options?: ScopedWriteCallOptions,
  ): Promise<WriteAnswer<GetMemoryResponse>> {
    return this.#call("recordFeedback", { id, body: request, query: { ...options?.scope } }, options);
  }
  profile(request: ScopeRequest = {}, options?: CallOptions): Promise<ProfileResponse> {
    return this.#call("profile", { body: request }, options);
  }
  contextBundle(request: ContextBundleRequest = {}, options?: CallOptions): Promise<ContextBundleResponse> {
    return this.#call("contextBundle", { body: request }, options);
  }
  unifiedState(request: ScopeRequest = {}, options?: CallOptions): Promise<UnifiedStateResponse> {
    return this.#call("unifiedState", { body: request }, options);
  }
  status(options?: CallOptions): Promise<StatusResponse> {
    return this.#call("status", {}, options);
  }
  noveltyScan(
    request: NoveltyScanRequest,
    options?: WriteCallOptions,
  ): Promise<WriteAnswer<NoveltyScanResponse>> {
    return this.#call("noveltyScan", { body: request }, options);
  }
  consolidate(
    request: ConsolidateRequest = {},
    options?: WriteCallOptions,
  ): Promise<WriteAnswer<JobResponse>> {
    return this.#call("consolidate", { body: request }, options);
  }
  importConversations(
    request: ImportConversationsRequest,
    options?: WriteCallOptions,
  ): Promise<WriteAnswer<JobResponse>> {
    return this.#call("importConversations", { body: request }, options);
  }
  /**
   * Imports a ChatGPT or Claude data export's `conversations.json` (its text, or parsed): cut by
   * `splitChatExport` into imports within `IMPORT_LIMITS`, each sent once the job before it finished
   * (`wait: false`: all started at once); the answer lists their jobs in order, finished. A
   * conversation the import would refuse is refused before any job starts. A job that fails stops the
   * import with a `MemoryError` of the job's code (`quota_exceeded`, …; `data.job`, `data.jobs` so far,
   * `data.parts`), one not finished within `jobTimeoutMs` with `timeout`; calling again imports the
   * rest and stores nothing twice.
   */
  importExport(
    request: ImportExportRequest,
    options: ImportExportOptions = {},
  ): Promise<{ jobs: MemoryJob[] }> {
    return importExport(this, request, options);
  }
  accessTrends(request: AccessTrendsRequest = {}, options?: CallOptions): Promise<AccessTrendsResponse> {
    return this.#call("accessTrends", { body: request }, options);
  }
  accessSummaries(
    request: AccessSummariesRequest = {},
    options?: CallOptions,
  ): Promise<AccessSummariesResponse> {
    return this.#call("accessSummaries", { body: request }, options);
  }
  /** A scope's memories, the latest written first; pass a page's `nextCursor` as `cursor` for the next. */
  listMemories(request: ListMemoriesRequest, options?: CallOptions): Promise<ListMemoriesResponse> {
    return this.#call("listMemories", { query: request }, options);
  }
  listTraces(request: ListTracesRequest = {}, options?: CallOptions): Promise<ListTracesResponse> {
    return this.#call("listTraces", { query: request }, options);
  }
  getTrace(id: string, options?: ScopedCallOptions): Promise<TraceResponse> {
    return this.#call("getTrace", { id, query: { ...options?.scope } }, options);
  }
  listJobs(request: ListJobsRequest = {}, options?: CallOptions): Promise<ListJobsResponse> {
    return this.#call("listJobs", { query: request }, options);
  }
  getJob(id: string, options?: ScopedCallOptions): Promise<JobResponse> {
    return this.#call("getJob", { id, query: { ...options?.scope } }, options);
  }
  /**
   * Deletes a scope for good (an unbound key only). Safe to retry: a second purge deletes nothing
   * more. The middlewares of this process drop their cached bundles of the scope at once.
   */
  async purge(request: PurgeRequest, options?: CallOptions): Promise<PurgeResponse> {
    const answer = await this.#call<PurgeResponse>("purge", { body: request }, options);
    notifyScopePurged(answer.scope);
    return answer;
  }

  /**
   * Polls a job until it succeeds or fails; a timeout (default 60 s) throws `timeout`, an abort
   * `aborted`. Polls every `intervalMs` (100) at first, then twice as long each time up to
   * `maxIntervalMs` (1,000), so a minutes-long job is not read back ten times a second.
   */
  async waitForJob(
    id: string,
    options: {
      timeoutMs?: number;
      intervalMs?: number;
      maxIntervalMs?: number;
      scope?: MemoryScope;
      signal?: AbortSignal;
    } = {},
  ): Promise<MemoryJob> {
    const timeoutMs = options.timeoutMs ?? 60_000;
    const deadline = Date.now() + timeoutMs;
    const signal = options.signal;
    const first = options.intervalMs ?? 100;
    const most = Math.max(first, options.maxIntervalMs ?? 1_000);
    for (let intervalMs = first; ; intervalMs = Math.min(intervalMs * 2, most)) {
      const { job } = await this.getJob(id, {
        ...(options.scope === undefined ? {} : { scope: options.scope }),
        ...(signal === undefined ? {} : { signal }),
      });
      if (job.status === "succeeded" || job.status === "failed") return job;
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new MemoryTimeoutError(`${this.baseUrl}/v1/jobs/${id}`, timeoutMs);
      await sleep(Math.min(intervalMs, remaining), signal).catch(() => {
        throw aborted("getJob", signal);
      });
    }
  }

  async #call<T>(
    operationId: string,
    input: { id?: string; body?: unknown; query?: object },
    options: WriteCallOptions = {},
  ): Promise<T> {
    // Aborted before the call: nothing is sent.
    if (options.signal?.aborted) throw aborted(operationId, options.signal);
    const route = routesById.get(operationId) as MemoryRoute;
    const body = route.body ? parseRequest(route.body as z.ZodType, input.body ?? {}) : undefined;
    const urlAt = (base: string) => {
      const url = new URL(base + route.path.replace("{id}", encodeURIComponent(input.id ?? "")));
      if (input.query) {
        for (const [key, value] of Object.entries(input.query)) {
          if (value !== undefined) url.searchParams.set(key, String(value));
        }
      }
      checkUrl(url, this.#allowPrivateNetwork);
      return url;
    };
    const headers: Record<string, string> = { accept: "application/json", ...this.#headers };
    if (this.#apiKey) headers.authorization = `Bearer ${this.#apiKey}`;
    // One key for every attempt of this call: a retry after a lost answer is answered, not done again.
    if (route.write) {
      // A key a header cannot carry (a line break, beyond ASCII) gets the service's own error, unsent.
      if (options.idempotencyKey !== undefined) checkIdempotencyKey(options.idempotencyKey);
      headers["idempotency-key"] = options.idempotencyKey ?? randomUUID();
    }
    let payload: string | undefined;
    if (body !== undefined) {
      payload = JSON.stringify(body);
      headers["content-type"] = "application/json";
      headers["content-length"] = String(Buffer.byteLength(payload));
    }
    // With several services, every one is tried at least once before the call fails.
    const maxRetries = Math.max(this.#maxRetries, this.#baseUrls.length - 1);
    for (let attempt = 0; ; attempt += 1) {
      let retryAfterMs: number | undefined;
      const serving = this.#current;
      try {
        const response = await sendRequest({
          url: urlAt(this.#baseUrls[serving] as string),
          method: route.method.toUpperCase(),
          headers,
          ...(payload === undefined ? {} : { body: payload }),
          timeoutMs: options.timeoutMs ?? this.#timeoutMs,
          allowPrivateNetwork: this.#allowPrivateNetwork,
          ...(options.signal ? { signal: options.signal } : {}),
        });
        if (response.status >= 200 && response.status < 300) {
          const answer = JSON.parse(response.text) as T;
          return response.headers["idempotent-replayed"] === "true" ? { ...answer, replayed: true } : answer;
        }
        const error = errorFromResponse(response.status, response.text);
        if (!error.retryable || attempt >= maxRetries) throw error;
        const retryAfter = Number(response.headers["retry-after"]);
        if (Number.isFinite(retryAfter) && retryAfter >= 0)
          retryAfterMs = Math.min(retryAfter * 1000, 30_000);
      } catch (error) {
        if (options.signal?.aborted) throw aborted(operationId, options.signal);
        const retryable = (error as { retryable?: boolean })?.retryable === true;
        if (!retryable || attempt >= maxRetries) throw error;
      }
      if (this.#baseUrls.length > 1) {
        // Fail over: this call's next attempt, and later calls, go to the next service at once.
        if (this.#current === serving) this.#current = (serving + 1) % this.#baseUrls.length;
        // Back off only once every service has been tried in this round.
        if (retryAfterMs === undefined && (attempt + 1) % this.#baseUrls.length !== 0) continue;
      }
      const ceiling = Math.min(maximumBackoffMs, this.#retryBaseMs * 2 ** attempt);
      await sleep(retryAfterMs ?? Math.random() * ceiling, options.signal).catch(() => {
        throw aborted(operationId, options.signal);
      });
    }
  }
}

function errorFromResponse(status: number, text: string): MemoryError {
  try {
    const parsed = JSON.parse(text) as {
      error?: { code?: string; message?: string; data?: unknown; retryable?: boolean };
    };
    if (parsed.error && typeof parsed.error.code === "string") {
      // The service sends only its own codes; an older or newer one passes through as sent.
      return new MemoryError(
        parsed.error.code as MemoryErrorCode,
        parsed.error.message ?? `HTTP ${status}`,
        status,
        {
          retryable: status === 429 || status >= 500 || parsed.error.retryable === true,
          data: parsed.error.data,
        },
      );
    }
  } catch {
    // Not our JSON (a proxy's error page): fall through to a generic coded error.
  }
  const code = status === 429 ? "rate_limited" : status >= 500 ? "unavailable" : "http_error";
  return new MemoryError(code, `The memory service answered HTTP ${status}: ${text.slice(0, 200)}`, status);
}

/** The error of a call its caller aborted: core's `aborted`, naming the operation. */
function aborted(operationId: string, signal: AbortSignal | undefined): ToolAbortedError {
  return new ToolAbortedError(`memory.${operationId}`, signal?.reason);
}

/** Waits `milliseconds`; rejects as soon as `signal` aborts (at once if it already has). */
function sleep(milliseconds: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, milliseconds);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
