/** What every group of the memory service's operations shares: the store, the clock, the embedder and the helpers over them. */
import { randomUUID } from "node:crypto";
import type { LanguageModelV4 } from "@ai-sdk/provider";
import { type Logger, silentLogger } from "@tackle/core";
import { MemoryError } from "../errors/memory-error.ts";
import type { Memory } from "../schemas/memory.ts";
import { type MemoryScope, scopeContains } from "../scope/memory-scope.ts";
import type { AccessRecord, MemoryStore, StoredEvent, StoredMemory } from "../store/memory-store.ts";
import { createEmbedder, type MemoryEmbeddingModel } from "./embedder.ts";
import type { IdempotencyOptions } from "./idempotent-writes.ts";
import { type MemoryQuotaOptions, resolveQuotas, withQuotas } from "./quotas.ts";
import { createRetention, type MemoryRetentionOptions } from "./retention.ts";

export interface MemoryServiceOptions {
  readonly store: MemoryStore;
  /** Any AI SDK embedding model; turns BM25 into fused BM25 + vector ranking. None: no network. */
  readonly embeddingModel?: MemoryEmbeddingModel;
  /** Longest one call to the embedding model may take; past it the operation fails `unavailable`. Default 30 000 ms. */
  readonly embeddingTimeoutMs?: number;
  /**
   * The embedding's similarity beside the text match (1) in fused ranking, both relative to their best
   * hit (default 0.1, set on the dev halves of bench/memory with the hashing test embedder, which only
   * restates the words; a semantic model may earn more: measure it on your own questions).
   */
  readonly vectorWeight?: number;
  /** Any AI SDK language model; improves the profile summary. None: deterministic synthesis. */
  readonly languageModel?: LanguageModelV4;
  /** Longest the profile waits for the language model; then it answers the deterministic summary. Default 30 000 ms. */
  readonly languageModelTimeoutMs?: number;
  readonly logger?: Logger;
  /** The clock (tests move it to age memories). */
  readonly now?: () => Date;
  /** Resume jobs left queued or running by a stopped process (default true). */
  readonly resumeJobs?: boolean;
  /** How long idempotency keys of writes are kept, and how long a repeat waits for the first answer. */
  readonly idempotency?: IdempotencyOptions;
  /**
   * How many retrieval traces and finished jobs each tenant keeps and for how long, and how many days
   * of access counts (ADR 0537): by default the newest 10,000 traces for 30 days, the newest 1,000
   * finished jobs for 30 days (imports that stored events are kept), access counts for 365 days.
   */
  readonly retention?: MemoryRetentionOptions;
  /**
   * What each tenant may store (ADR 0538): by default 1,000,000 memories and 1 GiB of their content,
   * 10,000,000 events and 4 GiB of theirs, 1 GiB of documents; `Infinity` switches a limit off. A
   * write past one is refused `quota_exceeded` (409) and stores nothing.
   */
  readonly quotas?: MemoryQuotaOptions;
}

/** The default `vectorWeight`. */
export const defaultVectorWeight = 0.1;

/** Memories above this word overlap (or cosine, with embeddings) are the same fact. */
export const duplicateSimilarity = 0.9;
export const duplicateCosine = 0.95;

export type ServiceContext = ReturnType<typeof createServiceContext>;

export function createServiceContext(options: MemoryServiceOptions) {
  const quotas = resolveQuotas(options.quotas);
  const store = withQuotas(options.store, quotas);
  const logger = options.logger ?? silentLogger;
  const clock = options.now ?? (() => new Date());
  const embedder = options.embeddingModel
    ? createEmbedder(options.embeddingModel, options.embeddingTimeoutMs)
    : undefined;
  const nowIso = () => clock().toISOString();
  const retention = createRetention(store, options.retention ?? {}, clock, logger);

  async function embedOne(text: string): Promise<Float32Array | undefined> {
    if (!embedder) return undefined;
    return (await embedder.embed([text]))[0];
  }

  /** The memory, if it exists in the tenant and lies inside `scope` (a memory's scope never changes). */
  function requireMemory(tenantId: string, id: string, scope: MemoryScope = {}): Promise<StoredMemory> {
    return requireStoredMemory(store, tenantId, id, scope);
  }

  /** Read-modify-write with optimistic concurrency; retries when another writer got there first. */
  function mutateMemory(
    tenantId: string,
    id: string,
    change: MemoryChange,
    expectedVersion?: number,
    scope?: MemoryScope,
  ): Promise<StoredMemory> {
    return mutateStoredMemory(store, nowIso, { tenantId, id, change, expectedVersion, scope });
  }

  async function recordTrace(
    tenantId: string,
    scope: MemoryScope,
    operation: "search" | "knowledge_search" | "context_bundle",
    query: string,
    results: { id: string; score: number; components?: Record<string, number> }[],
    started: number,
  ): Promise<string> {
    const id = randomUUID();
    const at = nowIso();
    const accesses: AccessRecord[] = [{ kind: "search", scope, memoryIds: [], at }];
    if (operation !== "knowledge_search" && results.length > 0) {
      accesses.push({ kind: "hit", scope, memoryIds: results.map((result) => result.id), at });
    }
    await store.insertTrace(
      {
        id,
        tenantId,
        operation,
        query,
        ...scope,
        ranking: embedder ? "fused" : "bm25",
        results: results as never,
        durationMs: Number((performance.now() - started).toFixed(3)),
        createdAt: at,
      },
      accesses,
    );
    retention.traceRecorded(tenantId, scope.userId);
    return id;
  }

  async function readBlocks(tenantId: string, scope: MemoryScope) {
    return (await store.getBlocks(tenantId, scope)).map((block) => ({
      ...block,
      remaining: block.limit - block.value.length,
    }));
  }

  return {
    store,
    logger,
    clock,
    nowIso,
    retention,
    quotas,
    embedder,
    vectorWeight: options.vectorWeight ?? defaultVectorWeight,
    languageModel: options.languageModel,
    languageModelTimeoutMs: options.languageModelTimeoutMs ?? 30_000,
    embedOne,
    requireMemory,
    mutateMemory,
    recordTrace,
    readBlocks,
  };
}

/** A change to one memory: its next state and the note its history keeps, or undefined to leave it. */
type MemoryChange = (
  memory: StoredMemory,
) =>
  | { next: Omit<StoredMemory, "version" | "updatedAt">; note: { change: never; reason?: string } }
  | undefined;

async function requireStoredMemory(
  store: MemoryStore,
  tenantId: string,
  id: string,
  scope: MemoryScope,
): Promise<StoredMemory> {
  const [memory] = await store.getMemories(tenantId, [id]);
  if (!memory || !scopeContains(scope, memory)) throw MemoryError.notFound("Memory", id);
  return memory;
}

/** Read-modify-write with optimistic concurrency; retries when another writer got there first. */
async function mutateStoredMemory(
  store: MemoryStore,
  nowIso: () => string,
  {
    tenantId,
    id,
    change,
    expectedVersion,
    scope,
  }: {
    readonly tenantId: string;
    readonly id: string;
    readonly change: MemoryChange;
    readonly expectedVersion: number | undefined;
    readonly scope: MemoryScope | undefined;
  },
): Promise<StoredMemory> {
  for (let attempt = 0; attempt < 20; attempt += 1) {
    const current = await requireStoredMemory(store, tenantId, id, scope ?? {});
    if (expectedVersion !== undefined && current.version !== expectedVersion) {
      throw new MemoryError(
        "conflict",
        `Memory ${id} is at version ${current.version}, not ${expectedVersion}`,
        409,
        {
          data: { id, version: current.version, expectedVersion },
        },
      );
    }
    const planned = change(current);
    if (!planned) return current;
    const next: StoredMemory = { ...planned.next, version: current.version + 1, updatedAt: nowIso() };
    try {
      if (await store.updateMemory(tenantId, next, current.version, planned.note)) return next;
    } catch (error) {
      if (isUniqueViolation(error)) {
        throw new MemoryError("conflict", "An active memory in this scope already holds that content", 409, {
          data: { id },
          cause: error,
        });
      }
      throw error;
    }
    if (expectedVersion !== undefined) {
      throw new MemoryError("conflict", `Memory ${id} changed while updating`, 409, { data: { id } });
    }
  }
  throw new MemoryError("conflict", `Memory ${id} kept changing; gave up after 20 attempts`, 409, {
    data: { id },
  });
}

export function publicMemory(memory: StoredMemory): Memory {
  const {
    tenantId: _tenant,
    dedupeKey: _dedupe,
    embedding: _embedding,
    metadataCharge: _charge,
    ...rest
  } = memory;
  return rest;
}

export function publicEvent(event: StoredEvent) {
  const { tenantId: _tenant, seq: _seq, metadataCharge: _charge, ...rest } = event;
  return rest;
}

/** SQLite `UNIQUE constraint failed` or PostgreSQL `23505`. */
function isUniqueViolation(error: unknown): boolean {
  const candidate = error as { code?: string; message?: string };
  return candidate?.code === "23505" || /UNIQUE constraint failed/.test(candidate?.message ?? "");
}
