/** The memory service: retrieval, writes, lifecycle, synthesis and jobs over one store. */
import { randomUUID } from "node:crypto";
import type { LanguageModelV4 } from "@ai-sdk/provider";
import { type Logger, silentLogger } from "@tackle/core";
import { MemoryError } from "../errors/memory-error.ts";
import {
  accessSummariesRequestSchema,
  accessTrendsRequestSchema,
  consolidateRequestSchema,
  importConversationsRequestSchema,
  listJobsQuerySchema,
  listTracesQuerySchema,
  noveltyScanRequestSchema,
} from "../schemas/admin.ts";
import { selfEditRequestSchema } from "../schemas/core-memory.ts";
import { recallConversationRequestSchema, writeEventRequestSchema } from "../schemas/event.ts";
import { ingestDocumentRequestSchema, searchKnowledgeRequestSchema } from "../schemas/knowledge.ts";
import {
  addMemoriesRequestSchema,
  addMemoryRequestSchema,
  feedbackRequestSchema,
  type Memory,
  procedureOutcomeRequestSchema,
  searchRequestSchema,
  updateMemoryRequestSchema,
} from "../schemas/memory.ts";
import { contextBundleRequestSchema, type MemoryProfile, scopeRequestSchema } from "../schemas/synthesis.ts";
import { type MemoryScope, pickScope, scopeContains, scopeKey } from "../scope/memory-scope.ts";
import type { AccessRecord, MemoryStore, StoredEvent, StoredMemory } from "../store/memory-store.ts";
import { chunkText } from "./chunk-text.ts";
import {
  diversify,
  liftByTimeAndSpeaker,
  mergeSecondPass,
  newNames,
  spreadToNeighbours,
  timeWindow,
} from "./conversation-retrieval.ts";
import { applyCoreMemoryEdits } from "./core-memory-edits.ts";
import { cosine, createEmbedder, type MemoryEmbeddingModel } from "./embedder.ts";
import { extractMemories } from "./extract-memories.ts";
import { createJobRunner } from "./job-runner.ts";
import { runConsolidation } from "./jobs/run-consolidation.ts";
import { runImport } from "./jobs/run-import.ts";
import type { MemoryService } from "./memory-service.ts";
import { parseRequest } from "./parse-request.ts";
import { synthesizeProfile } from "./profile.ts";
import { rankMemories } from "./rank-memories.ts";
import { contentHash, estimateTokens, queryTerms, searchTerms, textSimilarity } from "./text.ts";

export interface MemoryServiceOptions {
  readonly store: MemoryStore;
  /** Any AI SDK embedding model; turns BM25 into fused BM25 + vector ranking. None: no network. */
  readonly embeddingModel?: MemoryEmbeddingModel;
  /** Any AI SDK language model; improves the profile summary. None: deterministic synthesis. */
  readonly languageModel?: LanguageModelV4;
  readonly logger?: Logger;
  /** The clock (tests move it to age memories). */
  readonly now?: () => Date;
  /** Resume jobs left queued or running by a stopped process (default true). */
  readonly resumeJobs?: boolean;
}

/** Memories above this word overlap (or cosine, with embeddings) are the same fact. */
const duplicateSimilarity = 0.9;
const duplicateCosine = 0.95;
const packageVersion = "0.1.0";

export function createMemoryService(options: MemoryServiceOptions): MemoryService {
  const { store } = options;
  const logger = options.logger ?? silentLogger;
  const clock = options.now ?? (() => new Date());
  const embedder = options.embeddingModel ? createEmbedder(options.embeddingModel) : undefined;
  const startedAt = Date.now();
  const nowIso = () => clock().toISOString();

  async function embedOne(text: string): Promise<Float32Array | undefined> {
    if (!embedder) return undefined;
    return (await embedder.embed([text]))[0];
  }

  /** The memory, if it exists in the tenant and lies inside `scope` (a memory's scope never changes). */
  async function requireMemory(tenantId: string, id: string, scope: MemoryScope = {}): Promise<StoredMemory> {
    const [memory] = await store.getMemories(tenantId, [id]);
    if (!memory || !scopeContains(scope, memory)) throw MemoryError.notFound("Memory", id);
    return memory;
  }

  /** Read-modify-write with optimistic concurrency; retries when another writer got there first. */
  async function mutateMemory(
    tenantId: string,
    id: string,
    change: (
      memory: StoredMemory,
    ) =>
      | { next: Omit<StoredMemory, "version" | "updatedAt">; note: { change: never; reason?: string } }
      | undefined,
    expectedVersion?: number,
    scope?: MemoryScope,
  ): Promise<StoredMemory> {
    for (let attempt = 0; attempt < 20; attempt += 1) {
      const current = await requireMemory(tenantId, id, scope);
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
          throw new MemoryError(
            "conflict",
            "An active memory in this scope already holds that content",
            409,
            {
              data: { id },
              cause: error,
            },
          );
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

  async function findDuplicate(
    tenantId: string,
    scope: MemoryScope,
    content: string,
    embedding: Float32Array | undefined,
  ): Promise<{ memory: StoredMemory; similarity: number } | undefined> {
    const nearest = await nearestMemory(tenantId, scope, content, embedding);
    if (!nearest) return undefined;
    const threshold = nearest.byVector ? duplicateCosine : duplicateSimilarity;
    return nearest.similarity >= threshold ? nearest : undefined;
  }

  async function nearestMemory(
    tenantId: string,
    scope: MemoryScope,
    content: string,
    embedding: Float32Array | undefined,
  ): Promise<{ memory: StoredMemory; similarity: number; byVector: boolean } | undefined> {
    const candidates = await store.searchMemories(tenantId, scope, queryTerms(content), {
      limit: 10,
      order: "candidates",
    });
    let best: { memory: StoredMemory; similarity: number; byVector: boolean } | undefined;
    for (const { memory } of candidates) {
      const similarity = textSimilarity(content, memory.content);
      if (!best || similarity > best.similarity) best = { memory, similarity, byVector: false };
    }
    if (embedding && (!best || best.similarity < duplicateSimilarity)) {
      for (const memory of await store.embeddedMemories(tenantId, scope)) {
        const similarity = cosine(embedding, memory.embedding!);
        if (similarity >= duplicateCosine && (!best || similarity > best.similarity)) {
          best = { memory, similarity, byVector: true };
        }
      }
    }
    return best;
  }

  async function addMemory(
    tenantId: string,
    input: {
      scope: MemoryScope;
      content: string;
      kind: Memory["kind"];
      metadata?: Record<string, unknown>;
      importance?: number;
      provenance: Memory["provenance"];
      dedupe: boolean;
    },
  ) {
    const embedding = await embedOne(input.content);
    if (input.dedupe) {
      const duplicate = await findDuplicate(tenantId, input.scope, input.content, embedding);
      if (duplicate) {
        return {
          memory: duplicate.memory,
          created: false,
          duplicateOf: duplicate.memory.id,
          similarity: Number(duplicate.similarity.toFixed(4)),
        };
      }
    }
    const at = nowIso();
    const id = randomUUID();
    const memory: StoredMemory = {
      id,
      tenantId,
      kind: input.kind,
      content: input.content,
      ...input.scope,
      metadata: input.metadata ?? {},
      provenance: input.provenance,
      version: 1,
      status: "active",
      importance: input.importance ?? 0.5,
      feedback: { helpful: 0, unhelpful: 0 },
      outcomes: { successes: 0, failures: 0 },
      accessCount: 0,
      createdAt: at,
      updatedAt: at,
      dedupeKey: input.dedupe ? contentHash(input.content) : id,
      ...(embedding ? { embedding } : {}),
    };
    const result = await store.insertMemory(memory);
    if (result.created) return { memory: result.memory, created: true };
    return { memory: result.memory, created: false, duplicateOf: result.memory.id, similarity: 1 };
  }

  async function searchRanked(
    tenantId: string,
    scope: MemoryScope,
    query: string,
    limit: number,
    kinds: readonly Memory["kind"][] | undefined,
  ) {
    const window = timeWindow(query, clock());
    // A question naming a time may match the turn it asks about by the time alone: widen the pool.
    const candidateLimit = window ? 1000 : Math.max(50, limit * 5);
    const terms = searchTerms(query);
    const found = await store.searchMemories(tenantId, scope, terms, {
      limit: candidateLimit,
      ...(kinds ? { kinds } : {}),
    });
    let lexical = liftByTimeAndSpeaker(found, query, window).sort((left, right) => right.score - left.score);
    // Multi-hop: names in the first hits that the question lacks seed a second pass.
    const seeds = [...new Set(lexical.slice(0, 3).flatMap((hit) => newNames(hit.memory.content, query)))];
    if (seeds.length > 0) {
      const second = await store.searchMemories(tenantId, scope, searchTerms(`${seeds.join(" ")} ${query}`), {
        limit: Math.max(20, limit * 2),
        ...(kinds ? { kinds } : {}),
      });
      const required = new Set(seeds.map((seed) => seed.toLowerCase()));
      const withSeed = second.filter((hit) =>
        (hit.memory.content.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).some((word) => required.has(word)),
      );
      lexical = mergeSecondPass(lexical, liftByTimeAndSpeaker(withSeed, query, window));
    }
    // Neighbouring turns of the best hits share their score; 40 anchors, since the words of a question
    // often sit two turns before its answer, below many turns sharing one common word.
    const anchors = lexical.slice(0, Math.max(40, limit));
    const neighbours = await store.neighbourMemories(
      tenantId,
      anchors.map((hit) => hit.memory.id),
      2,
    );
    const inScope = new Map(
      [...neighbours].map(([id, list]) => [id, list.filter(({ memory }) => scopeContains(scope, memory))]),
    );
    lexical = spreadToNeighbours(lexical, inScope);
    let semantic: { memory: StoredMemory; score: number }[] | undefined;
    if (embedder) {
      const queryVector = (await embedder.embed([query]))[0]!;
      semantic = (await store.embeddedMemories(tenantId, scope, kinds))
        .map((memory) => ({ memory, score: cosine(queryVector, memory.embedding!) }))
        .filter((hit) => hit.score > 0)
        .sort((left, right) => right.score - left.score)
        .slice(0, Math.max(50, limit * 5));
    }
    return diversify(rankMemories(lexical, semantic, clock().getTime())).slice(0, limit);
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
    return id;
  }

  function publicMemory(memory: StoredMemory): Memory {
    const { tenantId: _tenant, dedupeKey: _dedupe, embedding: _embedding, ...rest } = memory;
    return rest;
  }

  function publicEvent(event: StoredEvent) {
    const { tenantId: _tenant, ...rest } = event;
    return rest;
  }

  const jobs = createJobRunner({
    store,
    logger,
    now: nowIso,
    handlers: {
      import: (job) =>
        runImport(job, {
          store,
          now: nowIso,
          writeEvent: (tenantId, request) => service.writeEvent(tenantId, request),
        }),
      consolidate: (job) => runConsolidation(job, { store, now: clock, mutateMemory }),
      novelty_scan: async (job) => job.result,
    },
  });

  async function readBlocks(tenantId: string, scope: MemoryScope) {
    return (await store.getBlocks(tenantId, scope)).map((block) => ({
      ...block,
      remaining: block.limit - block.value.length,
    }));
  }

  const service: MemoryService = {
    async search(tenantId, request) {
      const started = performance.now();
      const input = parseRequest(searchRequestSchema, request);
      const scope = pickScope(input);
      const ranked = await searchRanked(tenantId, scope, input.query, input.limit, input.kinds);
      const traceId = await recordTrace(
        tenantId,
        scope,
        "search",
        input.query,
        ranked.map((item) => ({ id: item.memory.id, score: item.score, components: item.components })),
        started,
      );
      return {
        traceId,
        ranking: embedder ? "fused" : "bm25",
        results: ranked.map((item) => ({
          memory: publicMemory(item.memory),
          score: item.score,
          components: item.components,
        })),
      };
    },

    async add(tenantId, request) {
      const input = parseRequest(addMemoryRequestSchema, request);
      const result = await addMemory(tenantId, {
        scope: pickScope(input),
        content: input.content,
        kind: input.kind,
        ...(input.metadata ? { metadata: input.metadata } : {}),
        ...(input.importance === undefined ? {} : { importance: input.importance }),
        provenance: {
          source: input.eventIds?.length ? "event" : "api",
          eventIds: input.eventIds ?? [],
          derivedFrom: [],
        },
        dedupe: input.dedupe,
      });
      return { ...result, memory: publicMemory(result.memory) };
    },

    async addBatch(tenantId, request) {
      const input = parseRequest(addMemoriesRequestSchema, request);
      const scope = pickScope(input);
      const vectors = embedder ? await embedder.embed(input.memories.map((item) => item.content)) : undefined;
      const at = nowIso();
      const planned: (
        | { kind: "insert"; memory: StoredMemory }
        | { kind: "duplicate"; of: StoredMemory; similarity: number }
      )[] = [];
      const accepted: StoredMemory[] = [];
      for (const [index, item] of input.memories.entries()) {
        const embedding = vectors?.[index];
        if (item.dedupe) {
          const stored = await findDuplicate(tenantId, scope, item.content, embedding);
          const inBatch = accepted.find(
            (other) => textSimilarity(other.content, item.content) >= duplicateSimilarity,
          );
          const duplicate = stored ?? (inBatch ? { memory: inBatch, similarity: 1 } : undefined);
          if (duplicate) {
            planned.push({ kind: "duplicate", of: duplicate.memory, similarity: duplicate.similarity });
            continue;
          }
        }
        const id = randomUUID();
        const memory: StoredMemory = {
          id,
          tenantId,
          kind: item.kind,
          content: item.content,
          ...scope,
          metadata: item.metadata ?? {},
          provenance: {
            source: item.eventIds?.length ? "event" : "api",
            eventIds: item.eventIds ?? [],
            derivedFrom: [],
          },
          version: 1,
          status: "active",
          importance: item.importance ?? 0.5,
          feedback: { helpful: 0, unhelpful: 0 },
          outcomes: { successes: 0, failures: 0 },
          accessCount: 0,
          createdAt: at,
          updatedAt: at,
          dedupeKey: item.dedupe ? contentHash(item.content) : id,
          ...(embedding ? { embedding } : {}),
        };
        accepted.push(memory);
        planned.push({ kind: "insert", memory });
      }
      const inserted = await store.insertMemories(accepted);
      let next = 0;
      return {
        results: planned.map((plan) => {
          if (plan.kind === "duplicate") {
            return {
              memory: publicMemory(plan.of),
              created: false,
              duplicateOf: plan.of.id,
              similarity: Number(plan.similarity.toFixed(4)),
            };
          }
          const result = inserted[next++]!;
          return result.created
            ? { memory: publicMemory(result.memory), created: true }
            : {
                memory: publicMemory(result.memory),
                created: false,
                duplicateOf: result.memory.id,
                similarity: 1,
              };
        }),
      };
    },

    async writeEvent(tenantId, request) {
      const input = parseRequest(writeEventRequestSchema, request);
      const scope = pickScope(input);
      const at = nowIso();
      const metadata = input.metadata ?? {};
      const importJobId = typeof metadata.importJobId === "string" ? metadata.importJobId : undefined;
      const { event, created } = await store.appendEvent({
        id: randomUUID(),
        tenantId,
        ...(input.customId ? { customId: input.customId } : {}),
        role: input.role,
        content: input.content,
        ...scope,
        metadata,
        source: importJobId ? "import" : "api",
        ...(importJobId ? { importJobId } : {}),
        occurredAt: input.occurredAt ? new Date(input.occurredAt).toISOString() : at,
        createdAt: at,
      });
      // A custom id is unique in the tenant: one already taken in another scope is refused without
      // answering that event (its id and text belong to another identity).
      if (!created && scopeKey(pickScope(event)) !== scopeKey(scope)) {
        throw new MemoryError(
          "conflict",
          "That customId is already used by an event of another scope; choose another",
          409,
        );
      }
      const memories: Memory[] = [];
      // The write that created the event extracts, so a retried write adds nothing twice. A rerun of the
      // import job that stored the event (its process was killed between storing and extracting) extracts
      // again: the memories already kept are refused as duplicates, the missing ones are added.
      const rerunOfItsJob = !created && importJobId !== undefined && event.importJobId === importJobId;
      if ((created || rerunOfItsJob) && input.infer && input.role === "user") {
        for (const extracted of extractMemories(input.content)) {
          const result = await addMemory(tenantId, {
            scope,
            content: extracted.content,
            kind: extracted.kind,
            provenance: {
              source: importJobId ? "import" : "event",
              eventIds: [event.id],
              ...(importJobId ? { importJobId } : {}),
              derivedFrom: [],
            },
            dedupe: true,
          });
          if (result.created) memories.push(publicMemory(result.memory));
        }
      }
      return { event: publicEvent(event), created, memories };
    },

    async recallConversation(tenantId, request) {
      const input = parseRequest(recallConversationRequestSchema, request);
      const events = await store.listEvents(tenantId, pickScope(input), {
        order: input.order,
        limit: input.limit + 1,
        ...(input.cursor === undefined ? {} : { cursor: Number(input.cursor) }),
      });
      const page = events.slice(0, input.limit);
      const last = page.at(-1);
      return {
        events: page.map(publicEvent),
        ...(events.length > input.limit && last ? { nextCursor: String(last.seq) } : {}),
      };
    },

    async ingestDocument(tenantId, request) {
      const input = parseRequest(ingestDocumentRequestSchema, request);
      const chunks = chunkText(input.content, input.chunkSize);
      const { document, created } = await store.insertDocument(
        {
          id: randomUUID(),
          tenantId,
          title: input.title,
          ...(input.source ? { source: input.source } : {}),
          ...pickScope(input),
          metadata: input.metadata ?? {},
          contentHash: contentHash(input.content),
          chunkCount: chunks.length,
          createdAt: nowIso(),
        },
        chunks.map((content, ordinal) => ({ id: randomUUID(), ordinal, content })),
      );
      const { tenantId: _tenant, ...rest } = document;
      return { document: rest, created };
    },

    async searchKnowledge(tenantId, request) {
      const started = performance.now();
      const input = parseRequest(searchKnowledgeRequestSchema, request);
      const scope = pickScope(input);
      const hits = await store.searchChunks(tenantId, scope, queryTerms(input.query), input.limit);
      const top = hits[0]?.score ?? 0;
      const results = hits.map((hit) => ({
        chunkId: hit.chunk.id,
        documentId: hit.document.id,
        title: hit.document.title,
        ...(hit.document.source ? { source: hit.document.source } : {}),
        ordinal: hit.chunk.ordinal,
        content: hit.chunk.content,
        score: Number((top > 0 ? hit.score / top : 0).toFixed(6)),
      }));
      const traceId = await recordTrace(
        tenantId,
        scope,
        "knowledge_search",
        input.query,
        results.map((result) => ({ id: result.chunkId, score: result.score })),
        started,
      );
      return { traceId, results };
    },

    async selfEdit(tenantId, request) {
      const input = parseRequest(selfEditRequestSchema, request);
      const scope = pickScope(input);
      for (let attempt = 0; attempt < 20; attempt += 1) {
        const current = await store.getBlocks(tenantId, scope);
        const changes = applyCoreMemoryEdits(current, input.edits, nowIso());
        if (changes.length === 0 || (await store.saveBlocks(tenantId, scope, changes))) {
          return { blocks: await readBlocks(tenantId, scope) };
        }
      }
      throw new MemoryError("conflict", "Core memory kept changing; gave up after 20 attempts", 409);
    },

    async getMemory(tenantId, id, scope) {
      const memory = await requireMemory(tenantId, id, scope);
      await store.recordAccess(tenantId, {
        kind: "read",
        scope: pickScope(memory),
        memoryIds: [id],
        at: nowIso(),
      });
      return { memory: publicMemory(memory) };
    },

    async updateMemory(tenantId, id, request, scope) {
      const input = parseRequest(updateMemoryRequestSchema, request);
      const embedding = input.content === undefined ? undefined : await embedOne(input.content);
      const memory = await mutateMemory(
        tenantId,
        id,
        (current) => {
          if (current.status === "deleted") {
            throw new MemoryError("conflict", `Memory ${id} is deleted; its history stays readable`, 409, {
              data: { id },
            });
          }
          const content = input.content ?? current.content;
          return {
            next: {
              ...current,
              content,
              kind: input.kind ?? current.kind,
              metadata: input.metadata ?? current.metadata,
              importance: input.importance ?? current.importance,
              dedupeKey: current.dedupeKey === current.id ? current.id : contentHash(content),
              ...(embedding ? { embedding } : {}),
            },
            note: { change: "update" as never, ...(input.reason ? { reason: input.reason } : {}) },
          };
        },
        input.expectedVersion,
        scope,
      );
      return { memory: publicMemory(memory) };
    },

    async deleteMemory(tenantId, id, reason, scope) {
      const memory = await mutateMemory(
        tenantId,
        id,
        (current) =>
          current.status === "deleted"
            ? undefined
            : {
                next: { ...current, status: "deleted" },
                note: { change: "delete" as never, ...(reason ? { reason } : {}) },
              },
        undefined,
        scope,
      );
      return { memory: publicMemory(memory) };
    },

    async memoryHistory(tenantId, id, scope) {
      await requireMemory(tenantId, id, scope);
      return { memoryId: id, versions: await store.memoryHistory(tenantId, id) };
    },

    async recordProcedureOutcome(tenantId, id, request, scope) {
      const input = parseRequest(procedureOutcomeRequestSchema, request);
      const memory = await mutateMemory(
        tenantId,
        id,
        (current) => ({
          next: {
            ...current,
            outcomes: {
              successes: current.outcomes.successes + (input.success ? 1 : 0),
              failures: current.outcomes.failures + (input.success ? 0 : 1),
            },
            provenance: input.eventId
              ? { ...current.provenance, eventIds: [...current.provenance.eventIds, input.eventId] }
              : current.provenance,
          },
          note: {
            change: "outcome" as never,
            reason: `${input.success ? "success" : "failure"}${input.note ? `: ${input.note}` : ""}`,
          },
        }),
        undefined,
        scope,
      );
      const total = memory.outcomes.successes + memory.outcomes.failures;
      return {
        memory: publicMemory(memory),
        successRate: total === 0 ? 0 : memory.outcomes.successes / total,
      };
    },

    async recordFeedback(tenantId, id, request, scope) {
      const input = parseRequest(feedbackRequestSchema, request);
      const memory = await mutateMemory(
        tenantId,
        id,
        (current) => ({
          next: {
            ...current,
            feedback: {
              helpful: current.feedback.helpful + (input.rating === "helpful" ? 1 : 0),
              unhelpful: current.feedback.unhelpful + (input.rating === "unhelpful" ? 1 : 0),
            },
          },
          note: {
            change: "feedback" as never,
            reason: [input.rating, input.traceId ? `trace ${input.traceId}` : "", input.note ?? ""]
              .filter(Boolean)
              .join(": "),
          },
        }),
        undefined,
        scope,
      );
      return { memory: publicMemory(memory) };
    },

    async profile(tenantId, request) {
      const scope = pickScope(parseRequest(scopeRequestSchema, request));
      const memories = await store.listMemories(tenantId, scope, {
        statuses: ["active"],
        kinds: ["preference", "fact", "procedure"],
        limit: 200,
        order: "importance",
      });
      return { profile: await synthesizeProfile(memories, options.languageModel, logger) };
    },

    async contextBundle(tenantId, request) {
      const started = performance.now();
      const input = parseRequest(contextBundleRequestSchema, request);
      const scope = pickScope(input);
      const [{ profile }, coreMemory] = await Promise.all([
        service.profile(tenantId, scope),
        readBlocks(tenantId, scope),
      ]);
      let budget = input.tokenBudget;
      let truncated = false;
      const take = (text: string) => {
        const cost = estimateTokens(text);
        if (cost > budget) {
          truncated = true;
          return false;
        }
        budget -= cost;
        return true;
      };
      const keptBlocks = coreMemory.filter((block) => block.value.length === 0 || take(block.value));
      const ranked = input.query
        ? await searchRanked(tenantId, scope, input.query, input.maxMemories, undefined)
        : (
            await store.listMemories(tenantId, scope, {
              statuses: ["active"],
              limit: input.maxMemories,
              order: "importance",
            })
          ).map((memory) => ({ memory, score: memory.importance }));
      // Each fact once: the memories answered as items (with their ids and dates) leave the
      // deterministic profile summary; a turn a memory was mined from, or that says what an item
      // says, is left out of the recent turns.
      const listed = new Set(ranked.map((item) => item.memory.content));
      const deduplicated = profile.generatedBy === "deterministic" ? withoutListed(profile, listed) : profile;
      const keptProfile = take(deduplicated.summary)
        ? deduplicated
        : { ...profile, summary: "", preferences: [], facts: [], procedures: [] };
      const told: string[] = [];
      const stated = (text: string) =>
        keptBlocks.some((block) => block.value.includes(text)) ||
        told.some((other) => textSimilarity(other, text) >= duplicateSimilarity);
      const minedFrom = new Set<string>();
      const memories = [];
      for (const item of ranked) {
        for (const eventId of item.memory.provenance.eventIds) minedFrom.add(eventId);
        if (stated(item.memory.content)) continue;
        if (!take(item.memory.content)) break;
        told.push(item.memory.content);
        memories.push({
          id: item.memory.id,
          kind: item.memory.kind,
          content: item.memory.content,
          score: item.score,
          createdAt: item.memory.createdAt,
        });
      }
      const events =
        input.maxEvents > 0
          ? await store.listEvents(tenantId, scope, { order: "desc", limit: input.maxEvents })
          : [];
      const recentEvents = [];
      for (const event of events) {
        if (minedFrom.has(event.id) || stated(event.content)) continue;
        if (!take(event.content)) break;
        told.push(event.content);
        recentEvents.push({
          id: event.id,
          role: event.role,
          content: event.content,
          ...(event.sessionId ? { sessionId: event.sessionId } : {}),
          occurredAt: event.occurredAt,
        });
      }
      recentEvents.reverse();
      const traceId = input.query
        ? await recordTrace(
            tenantId,
            scope,
            "context_bundle",
            input.query,
            memories.map((memory) => ({ id: memory.id, score: memory.score })),
            started,
          )
        : undefined;
      return {
        profile: keptProfile,
        coreMemory: keptBlocks,
        memories,
        recentEvents,
        tokenEstimate: input.tokenBudget - budget,
        tokenBudget: input.tokenBudget,
        truncated,
        ...(traceId ? { traceId } : {}),
      };
    },

    async unifiedState(tenantId, request) {
      const scope = pickScope(parseRequest(scopeRequestSchema, request));
      const [coreMemory, memories, events, documents, recentMemories, recentEvents, queued, running] =
        await Promise.all([
          readBlocks(tenantId, scope),
          store.countMemories(tenantId, scope),
          store.countEvents(tenantId, scope),
          store.countDocuments(tenantId, scope),
          store.listMemories(tenantId, scope, { statuses: ["active"], limit: 5, order: "recent" }),
          store.listEvents(tenantId, scope, { order: "desc", limit: 5 }),
          store.listJobs(tenantId, scope, { status: "queued", limit: 20 }),
          store.listJobs(tenantId, scope, { status: "running", limit: 20 }),
        ]);
      return {
        coreMemory,
        counts: { memories, events, documents },
        recentMemories: recentMemories.map(publicMemory),
        recentEvents: recentEvents.map(publicEvent),
        activeJobs: [...running, ...queued].map((job) => ({
          id: job.id,
          type: job.type,
          status: job.status,
        })),
      };
    },

    async status(tenantId) {
      return {
        ok: true,
        version: packageVersion,
        store: store.kind,
        retrieval: embedder ? "fused" : "bm25",
        ...(embedder ? { embeddingModel: embedder.modelId } : {}),
        ...(options.languageModel
          ? { languageModel: `${options.languageModel.provider}:${options.languageModel.modelId}` }
          : {}),
        tenant: tenantId,
        counts: await store.counts(tenantId),
        uptimeSeconds: Math.round((Date.now() - startedAt) / 1000),
      };
    },

    async chainTrace(tenantId, id, scope = {}) {
      const memory = await requireMemory(tenantId, id, scope);
      // What the chain reaches must lie inside the caller's scope too: ids in a memory's provenance
      // are given by writers and may name records of another identity.
      const visible = (record: MemoryScope) => scopeContains(scope, record);
      const [versions, allEvents, allDerived, foundJob, foundDocument] = await Promise.all([
        store.memoryHistory(tenantId, id),
        store.getEvents(tenantId, memory.provenance.eventIds),
        store.getMemories(tenantId, memory.provenance.derivedFrom),
        memory.provenance.importJobId ? store.getJob(tenantId, memory.provenance.importJobId) : undefined,
        memory.provenance.documentId ? store.getDocument(tenantId, memory.provenance.documentId) : undefined,
      ]);
      const events = allEvents.filter(visible);
      const derivedFrom = allDerived.filter(visible);
      const importJob = foundJob && visible(foundJob) ? foundJob : undefined;
      const document = foundDocument && visible(foundDocument) ? foundDocument : undefined;
      const strip = <T extends { tenantId: string }>(value: T) => {
        const { tenantId: _tenant, ...rest } = value;
        return rest;
      };
      return {
        memory: publicMemory(memory),
        versions,
        events: events.map(publicEvent),
        derivedFrom: derivedFrom.map(publicMemory),
        ...(importJob ? { importJob: strip(importJob) } : {}),
        ...(document ? { document: strip(document) } : {}),
      };
    },

    async noveltyScan(tenantId, request) {
      const input = parseRequest(noveltyScanRequestSchema, request);
      const scope = pickScope(input);
      const results = [];
      for (const content of input.candidates) {
        const nearest = await nearestMemory(tenantId, scope, content, await embedOne(content));
        results.push({
          content,
          novel: !nearest || nearest.similarity < input.threshold,
          ...(nearest
            ? {
                nearest: {
                  memoryId: nearest.memory.id,
                  content: nearest.memory.content,
                  similarity: Number(nearest.similarity.toFixed(4)),
                },
              }
            : {}),
        });
      }
      const job = await jobs.record(tenantId, "novelty_scan", scope, input, { results });
      return { jobId: job.id, results };
    },

    async consolidate(tenantId, request) {
      const input = parseRequest(consolidateRequestSchema, request);
      return { job: await jobs.enqueue(tenantId, "consolidate", pickScope(input), input) };
    },

    async importConversations(tenantId, request) {
      const input = parseRequest(importConversationsRequestSchema, request);
      return { job: await jobs.enqueue(tenantId, "import", pickScope(input), input) };
    },

    async accessTrends(tenantId, request) {
      const input = parseRequest(accessTrendsRequestSchema, request);
      const today = clock();
      const since = new Date(today.getTime() - (input.days - 1) * 86_400_000).toISOString().slice(0, 10);
      const rows = new Map(
        (await store.accessTrends(tenantId, pickScope(input), since)).map((row) => [row.day, row]),
      );
      const days = [];
      for (let offset = input.days - 1; offset >= 0; offset -= 1) {
        const day = new Date(today.getTime() - offset * 86_400_000).toISOString().slice(0, 10);
        days.push(rows.get(day) ?? { day, searches: 0, hits: 0, reads: 0 });
      }
      return { days };
    },

    async accessSummaries(tenantId, request) {
      const input = parseRequest(accessSummariesRequestSchema, request);
      const scope = pickScope(input);
      const [counts, top, searches] = await Promise.all([
        store.countMemories(tenantId, scope),
        store.listMemories(tenantId, scope, { statuses: ["active"], limit: input.limit, order: "accessed" }),
        store.countSearches(tenantId, scope),
      ]);
      const everAccessed = await store.listMemories(tenantId, scope, {
        statuses: ["active"],
        limit: 100_000,
        order: "accessed",
      });
      const accessed = everAccessed.filter((memory) => memory.accessCount > 0).length;
      return {
        totals: { memories: counts.active, accessed, neverAccessed: counts.active - accessed, searches },
        top: top
          .filter((memory) => memory.accessCount > 0)
          .map((memory) => ({
            memoryId: memory.id,
            content: memory.content,
            accessCount: memory.accessCount,
            ...(memory.lastAccessedAt ? { lastAccessedAt: memory.lastAccessedAt } : {}),
          })),
      };
    },

    async listTraces(tenantId, request) {
      const input = parseRequest(listTracesQuerySchema, request);
      const traces = await store.listTraces(tenantId, pickScope(input), {
        limit: input.limit,
        ...(input.operation ? { operation: input.operation } : {}),
      });
      return { traces: traces.map(({ tenantId: _tenant, ...trace }) => trace) };
    },

    async getTrace(tenantId, id, scope = {}) {
      const trace = await store.getTrace(tenantId, id);
      if (!trace || !scopeContains(scope, trace)) throw MemoryError.notFound("Trace", id);
      const { tenantId: _tenant, ...rest } = trace;
      return { trace: rest };
    },

    async listJobs(tenantId, request) {
      const input = parseRequest(listJobsQuerySchema, request);
      const list = await store.listJobs(tenantId, pickScope(input), {
        limit: input.limit,
        ...(input.type ? { type: input.type } : {}),
        ...(input.status ? { status: input.status } : {}),
      });
      return { jobs: list.map(({ tenantId: _tenant, ...job }) => job) };
    },

    async getJob(tenantId, id, scope = {}) {
      const job = await store.getJob(tenantId, id);
      if (!job || !scopeContains(scope, job)) throw MemoryError.notFound("Job", id);
      const { tenantId: _tenant, ...rest } = job;
      return { job: rest };
    },

    async close() {
      await jobs.close();
      await store.close();
    },
  };

  if (options.resumeJobs !== false) jobs.resume();
  return service;
}

/** The deterministic profile without the memories already answered as items. */
function withoutListed(profile: MemoryProfile, listed: ReadonlySet<string>): MemoryProfile {
  const keep = (items: readonly string[]) => items.filter((item) => !listed.has(item));
  const preferences = keep(profile.preferences);
  const facts = keep(profile.facts);
  const procedures = keep(profile.procedures);
  const summary = [
    preferences.length > 0 ? `Preferences: ${preferences.join("; ")}` : "",
    facts.length > 0 ? `Facts: ${facts.join("; ")}` : "",
    procedures.length > 0 ? `Procedures: ${procedures.join("; ")}` : "",
  ]
    .filter((part) => part.length > 0)
    .join("\n");
  return { ...profile, summary, preferences, facts, procedures };
}

/** SQLite `UNIQUE constraint failed` or PostgreSQL `23505`. */
function isUniqueViolation(error: unknown): boolean {
  const candidate = error as { code?: string; message?: string };
  return candidate?.code === "23505" || /UNIQUE constraint failed/.test(candidate?.message ?? "");
}
