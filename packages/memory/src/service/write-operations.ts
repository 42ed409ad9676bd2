/** Writes: memories (one or a batch, behind the novelty check), conversation events, documents, core memory. */
import { createHash, randomUUID } from "node:crypto";
import { MemoryError } from "../errors/memory-error.ts";
import { selfEditRequestSchema } from "../schemas/core-memory.ts";
import { writeEventRequestSchema } from "../schemas/event.ts";
import { ingestDocumentRequestSchema } from "../schemas/knowledge.ts";
import { addMemoriesRequestSchema, addMemoryRequestSchema, type Memory } from "../schemas/memory.ts";
import { type MemoryScope, pickScope, scopeKey } from "../scope/memory-scope.ts";
import type { StoredEvent, StoredMemory } from "../store/memory-store.ts";
import { chunkText } from "./chunk-text.ts";
import { applyCoreMemoryEdits } from "./core-memory-edits.ts";
import { episodeOf, eventEpisodeId } from "./event-episode.ts";
import { extractMemories } from "./extract-memories.ts";
import type { MemoryService } from "./memory-service.ts";
import type { NoveltyCheck } from "./novelty-check.ts";
import { parseRequest } from "./parse-request.ts";
import { duplicateSimilarity, publicEvent, publicMemory, type ServiceContext } from "./service-context.ts";
import { contentHash, textSimilarity } from "./text.ts";

export type WriteOperations = Pick<
  MemoryService,
  "add" | "addBatch" | "writeEvent" | "ingestDocument" | "selfEdit"
>;

/** A memory as first stored: version 1, active, no feedback, outcomes or accesses yet. */
function newMemory(
  tenantId: string,
  at: string,
  fields: {
    id?: string | undefined;
    scope: MemoryScope;
    content: string;
    kind: Memory["kind"];
    metadata?: Record<string, unknown> | undefined;
    importance?: number | undefined;
    provenance: Memory["provenance"];
    dedupe: boolean;
    embedding: Float32Array | undefined;
  },
): StoredMemory {
  const id = fields.id ?? randomUUID();
  return {
    id,
    tenantId,
    kind: fields.kind,
    content: fields.content,
    ...fields.scope,
    metadata: fields.metadata ?? {},
    provenance: fields.provenance,
    version: 1,
    status: "active",
    importance: fields.importance ?? 0.5,
    feedback: { helpful: 0, unhelpful: 0 },
    outcomes: { successes: 0, failures: 0 },
    accessCount: 0,
    createdAt: at,
    updatedAt: at,
    dedupeKey: fields.dedupe ? contentHash(fields.content) : id,
    ...(fields.embedding ? { embedding: fields.embedding } : {}),
  };
}

/**
 * Whether a write is checked for duplicates: the caller's `dedupe`, else on for every kind but
 * `episode`. An episode is something that happened (a conversation turn): a repeated "Haha, totally"
 * is a second turn with its own date and neighbours, which temporal and context retrieval need.
 */
export function dedupeByDefault(input: {
  readonly dedupe?: boolean | undefined;
  readonly kind: Memory["kind"];
}) {
  return input.dedupe ?? input.kind !== "episode";
}

/**
 * The id a memory extracted by an import gets: one per tenant, scope and fact (its normalized text), so
 * an import run again (a job resumed after a crash, the same transcript imported twice) finds the
 * memory it made the first time in whatever state the user left it (deleted, edited, merged) and
 * never makes it again. Shaped as a UUID (version 8: derived by the application).
 */
export function importedMemoryId(tenantId: string, scope: MemoryScope, content: string): string {
  const hex = createHash("sha256")
    .update(["import-memory", tenantId, scopeKey(scope), contentHash(content)].join("\u0000"))
    .digest("hex");
  const variant = ((Number.parseInt(hex[16] ?? "0", 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

export function createWriteOperations(context: ServiceContext, novelty: NoveltyCheck): WriteOperations {
  const { store, embedder, nowIso, embedOne, readBlocks } = context;
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

  /**
   * The episode an event's turn becomes, once per event (its id derives from the event's): a retried
   * write or a rerun import finds it and adds nothing.
   */
  async function keepEpisode(
    tenantId: string,
    event: StoredEvent,
    episode: { content: string; speaker: string },
    embedding: Float32Array | undefined,
  ) {
    const id = eventEpisodeId(tenantId, event.id);
    if ((await store.getMemories(tenantId, [id])).length > 0) return;
    await store.insertMemory(
      newMemory(tenantId, event.occurredAt, {
        id,
        scope: pickScope(event),
        content: episode.content,
        kind: "episode",
        metadata: { speaker: episode.speaker, role: event.role },
        provenance: {
          source: event.importJobId ? "import" : "event",
          eventIds: [event.id],
          ...(event.importJobId ? { importJobId: event.importJobId } : {}),
          derivedFrom: [],
        },
        dedupe: false,
        embedding,
      }),
    );
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
    },

    async writeEvent(tenantId, request) {
      const input = parseRequest(writeEventRequestSchema, request);
      // A user's or an assistant's turn is also kept as an episode that search ranks (ADR 0361).
      const episode = episodeOf(input);
      // What a user turn says is extracted before the transaction, with its embeddings (one model
      // call for all), so no model call is made while the transaction holds the store.
      const found = input.infer && input.role === "user" ? extractMemories(input.content) : [];
      const texts = [...(episode ? [episode.content] : []), ...found.map((item) => item.content)];
      const embedded = embedder && texts.length > 0 ? await embedder.embed(texts) : undefined;
      const episodeVector = episode ? embedded?.[0] : undefined;
      const vectors = episode ? embedded?.slice(1) : embedded;
      // The event and the memories extracted from it commit together: a write that fails (or a process
      // that dies) part way leaves neither, and its retry stores and extracts both.
      return store.withTransaction(async () => {
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
        if (episode && (created || (importJobId !== undefined && event.importJobId === importJobId))) {
          await keepEpisode(tenantId, event, episode, episodeVector);
        }
        // The write that created the event extracts, so a retried write adds nothing twice. A rerun of the
        // import job that stored the event (its process was killed between storing and extracting) extracts
        // again: the memories already kept are refused as duplicates, the missing ones are added.
        const rerunOfItsJob = !created && importJobId !== undefined && event.importJobId === importJobId;
        if ((created || rerunOfItsJob) && found.length > 0) {
          // An import's memories have ids of their fact: one the import made before is never made again,
          // whatever became of it (a memory the user deleted stays deleted).
          const ids = importJobId ? found.map((item) => importedMemoryId(tenantId, scope, item.content)) : [];
          const madeBefore = new Set((await store.getMemories(tenantId, ids)).map((memory) => memory.id));
          for (const [index, extracted] of found.entries()) {
            const id = ids[index];
            if (id !== undefined && madeBefore.has(id)) continue;
            const result = await addMemory(tenantId, {
              ...(id === undefined ? {} : { id }),
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
              embedding: vectors?.[index],
            });
            if (result.created) memories.push(publicMemory(result.memory));
            else if (id !== undefined && result.memory.id !== id) {
              // Another memory (an API add, a live turn) already holds the fact: the import's own
              // statement of it is kept under its id, superseded by that memory, so a rerun of the job
              // finds it made and never makes it again, whatever the user did to that memory since.
              const superseded = newMemory(tenantId, nowIso(), {
                id,
                scope,
                content: extracted.content,
                kind: extracted.kind,
                provenance: {
                  source: "import",
                  eventIds: [event.id],
                  ...(importJobId ? { importJobId } : {}),
                  derivedFrom: [],
                },
                dedupe: true,
                embedding: undefined,
              });
              await store.insertMemory({
                ...superseded,
                status: "superseded",
                supersededBy: result.memory.id,
              });
            }
          }
        }
        return { event: publicEvent(event), created, memories };
      });
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
