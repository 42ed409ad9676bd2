/** Lifecycle of one memory by id: read, update, delete, history, feedback, outcomes, provenance chain. */

import type { z } from "zod";
import { MemoryError } from "../errors/memory-error.ts";
import {
  feedbackRequestSchema,
  listMemoriesQuerySchema,
  procedureOutcomeRequestSchema,
  updateMemoryRequestSchema,
} from "../schemas/memory.ts";
import { type MemoryScope, pickScope, scopeContains } from "../scope/memory-scope.ts";
import type { StoredMemory } from "../store/memory-store.ts";
import type { MemoryService } from "./memory-service.ts";
import { parseRequest } from "./parse-request.ts";
import { publicEvent, publicMemory, type ServiceContext } from "./service-context.ts";
import { contentHash, queryTerms } from "./text.ts";

type ProcedureOutcome = z.infer<typeof procedureOutcomeRequestSchema>;
type Feedback = z.infer<typeof feedbackRequestSchema>;

/** Lowercase, single spaces, no closing punctuation: how a fact is found inside a turn. */
const normalized = (text: string) =>
  text
    .toLowerCase()
    .replace(/\s+/g, " ")
    .replace(/[.!?\s]+$/u, "")
    .trim();

export type LifecycleOperations = Pick<
  MemoryService,
  | "listMemories"
  | "getMemory"
  | "updateMemory"
  | "deleteMemory"
  | "memoryHistory"
  | "recordProcedureOutcome"
  | "recordFeedback"
  | "chainTrace"
>;

export function createLifecycleOperations(context: ServiceContext): LifecycleOperations {
  const { store, nowIso, embedOne, requireMemory, mutateMemory } = context;
  return {
    listMemories: (tenantId, request) => listMemories(context, tenantId, request),

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
          // Metadata the caller sends is charged as sent; kept, it keeps its charge (ADR 0563).
          const { metadataCharge, ...kept } = current;
          return {
            next: {
              ...kept,
              ...(input.metadata === undefined && metadataCharge !== undefined ? { metadataCharge } : {}),
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

    async deleteMemory(tenantId, id, request, scope) {
      const reason = request.reason;
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
      await forgetTurnsStating(context, tenantId, memory);
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
        (current) => withOutcome(current, input),
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
        (current) => withFeedback(current, input),
        undefined,
        scope,
      );
      return { memory: publicMemory(memory) };
    },

    chainTrace: (tenantId, id, scope = {}) => chainTrace(context, tenantId, id, scope),
  };
}

/** One page of a scope's memories, newest written first; the cursor must be a memory of that scope. */
async function listMemories(
  { store }: ServiceContext,
  tenantId: string,
  request: Parameters<LifecycleOperations["listMemories"]>[1],
): ReturnType<LifecycleOperations["listMemories"]> {
  const input = parseRequest(listMemoriesQuerySchema, request);
  const scope = pickScope(input);
  if (input.cursor !== undefined) {
    // A cursor is a memory of the listed scope; another identity's id answers as an unknown one.
    const [at] = await store.getMemories(tenantId, [input.cursor]);
    if (at === undefined || !scopeContains(scope, at)) {
      throw new MemoryError(
        "invalid_input",
        "cursor is the nextCursor of a previous page of this list",
        400,
        {
          data: { issues: [{ path: ["cursor"], message: "not a cursor of this scope" }] },
        },
      );
    }
  }
  const memories = await store.listMemories(tenantId, scope, {
    statuses: [input.status],
    ...(input.kind ? { kinds: [input.kind] } : {}),
    limit: input.limit + 1,
    order: "written",
    ...(input.cursor === undefined ? {} : { beforeId: input.cursor }),
  });
  const page = memories.slice(0, input.limit);
  const last = page.at(-1);
  return {
    memories: page.map(publicMemory),
    ...(memories.length > input.limit && last ? { nextCursor: last.id } : {}),
  };
}

/**
 * A fact forgotten is forgotten in the turns that state it word for word: the episode kept of such
 * a turn would answer the same search (ADR 0361). The events stay in the conversation's log.
 */
async function forgetTurnsStating(
  { store, mutateMemory }: ServiceContext,
  tenantId: string,
  memory: StoredMemory,
): Promise<void> {
  if (memory.kind === "episode") return;
  const said = normalized(memory.content);
  const turns = await store.searchMemories(tenantId, pickScope(memory), queryTerms(memory.content), {
    limit: 50,
    every: true,
    order: "candidates",
    kinds: ["episode"],
  });
  for (const { memory: turn } of turns) {
    if (!normalized(turn.content).includes(said)) continue;
    await mutateMemory(tenantId, turn.id, (current) =>
      current.status === "deleted"
        ? undefined
        : {
            next: { ...current, status: "deleted" },
            note: { change: "delete" as never, reason: `states the deleted memory ${memory.id}` },
          },
    );
  }
}

function withOutcome(current: StoredMemory, input: ProcedureOutcome) {
  return {
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
  };
}

function withFeedback(current: StoredMemory, input: Feedback) {
  return {
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
  };
}

/** A memory with its versions and what it came from, cut to what the caller's scope may see. */
async function chainTrace(
  { store, requireMemory }: ServiceContext,
  tenantId: string,
  id: string,
  scope: MemoryScope,
): ReturnType<LifecycleOperations["chainTrace"]> {
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
}
