/** Writes: memories (one or a batch, behind the novelty check), conversation events, documents, core memory. */
import { randomUUID } from "node:crypto";
import { MemoryError } from "../errors/memory-error.ts";
import { selfEditRequestSchema } from "../schemas/core-memory.ts";
import { ingestDocumentRequestSchema } from "../schemas/knowledge.ts";
import { addMemoriesRequestSchema, addMemoryRequestSchema, type Memory } from "../schemas/memory.ts";
import { type MemoryScope, pickScope } from "../scope/memory-scope.ts";
import type { StoredMemory } from "../store/memory-store.ts";
import { chunkText } from "./chunk-text.ts";
import { applyCoreMemoryEdits } from "./core-memory-edits.ts";
import type { MemoryService } from "./memory-service.ts";
import { dedupeByDefault, newMemory } from "./new-memory.ts";
import type { NoveltyCheck } from "./novelty-check.ts";
import { parseRequest } from "./parse-request.ts";
import { duplicateSimilarity, publicMemory, type ServiceContext } from "./service-context.ts";
import { contentHash, textSimilarity } from "./text.ts";
import type { createWriteEvents } from "./write-events.ts";

export type WriteOperations = Pick<
  MemoryService,
  "add" | "addBatch" | "writeEvent" | "ingestDocument" | "selfEdit"
>;

export function createWriteOperations(
  context: ServiceContext,
  novelty: NoveltyCheck,
  { writeEvents }: ReturnType<typeof createWriteEvents>,
): WriteOperations {
  const { store, nowIso, embedOne, readBlocks } = context;
  const { findDuplicate } = novelty;

  async function addMemory(
    tenantId: string,
    input: {
      id?: string;
      scope: MemoryScope;
      content: string;
      kind: Memory["kind"];
      metadata?: Record<string, unknown>;
      importance?: number;
      provenance: Memory["provenance"];
      dedupe: boolean;
      /** Computed before the caller's transaction, so no model call is made inside it. */
      embedding?: Float32Array | undefined;
    },
  ) {
    const embedding = input.embedding ?? (await embedOne(input.content));
    if (input.dedupe) {
      const duplicate = await findDuplicate(tenantId, input.scope, input.content, embedding, input.kind);
      if (duplicate) {
        return {
          memory: duplicate.memory,
          created: false,
          duplicateOf: duplicate.memory.id,
          similarity: Number(duplicate.similarity.toFixed(4)),
        };
      }
    }
    const memory = newMemory(tenantId, nowIso(), { ...input, embedding });
    const result = await store.insertMemory(memory);
    if (result.created) return { memory: result.memory, created: true };
    return { memory: result.memory, created: false, duplicateOf: result.memory.id, similarity: 1 };
  }

  return {
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
        dedupe: dedupeByDefault(input),
      });
      return { ...result, memory: publicMemory(result.memory) };
    },

    addBatch: (tenantId, request) => addBatch(context, novelty, tenantId, request),

    async writeEvent(tenantId, request) {
      const [answer] = await writeEvents(tenantId, [request]);
      return answer!;
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
  };
}

/**
 * A batch of memories in one transaction: each checked for novelty against the store and the batch
 * before it, every text embedded in one model call first.
 */
async function addBatch(
  { store, embedder, nowIso }: ServiceContext,
  { findDuplicate }: NoveltyCheck,
  tenantId: string,
  request: Parameters<MemoryService["addBatch"]>[1],
): ReturnType<MemoryService["addBatch"]> {
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
    if (dedupeByDefault(item)) {
      const stored = await findDuplicate(tenantId, scope, item.content, embedding, item.kind);
      const inBatch = accepted.find(
        (other) => textSimilarity(other.content, item.content) >= duplicateSimilarity,
      );
      const duplicate = stored ?? (inBatch ? { memory: inBatch, similarity: 1 } : undefined);
      if (duplicate) {
        planned.push({ kind: "duplicate", of: duplicate.memory, similarity: duplicate.similarity });
        continue;
      }
    }
    const memory = newMemory(tenantId, at, {
      ...item,
      dedupe: dedupeByDefault(item),
      scope,
      provenance: {
        source: item.eventIds?.length ? "event" : "api",
        eventIds: item.eventIds ?? [],
        derivedFrom: [],
      },
      embedding,
    });
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
}
