/** Synthesis: the profile, the context bundle a model reads, and the unified state of a scope. */
import { contextBundleRequestSchema, type MemoryProfile, scopeRequestSchema } from "../schemas/synthesis.ts";
import { type MemoryScope, pickScope } from "../scope/memory-scope.ts";
import type { MemoryService } from "./memory-service.ts";
import { parseRequest } from "./parse-request.ts";
import { synthesizeProfile } from "./profile.ts";
import type { SearchRanked } from "./search-ranked.ts";
import { duplicateSimilarity, publicEvent, publicMemory, type ServiceContext } from "./service-context.ts";
import { estimateTokens, textSimilarity } from "./text.ts";

export type SynthesisOperations = Pick<MemoryService, "profile" | "contextBundle" | "unifiedState">;

export function createSynthesisOperations(
  context: ServiceContext,
  searchRanked: SearchRanked,
): SynthesisOperations {
  const { store, logger, languageModel, languageModelTimeoutMs, readBlocks, recordTrace } = context;
  const service: SynthesisOperations = {
    async profile(tenantId, request) {
      const scope = pickScope(parseRequest(scopeRequestSchema, request));
      const memories = await store.listMemories(tenantId, scope, {
        statuses: ["active"],
        kinds: ["preference", "fact", "procedure"],
        limit: 200,
        order: "importance",
      });
      return { profile: await synthesizeProfile(memories, languageModel, logger, languageModelTimeoutMs) };
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
      const events =
        input.maxEvents > 0
          ? await store.listEvents(tenantId, scope, { order: "desc", limit: input.maxEvents })
          : [];
      const ranked = await bundleCandidates(context, searchRanked, tenantId, scope, input, events);
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

    unifiedState: (tenantId, request) => unifiedState(context, tenantId, request),
  };
  return service;
}

/**
 * The memories a bundle may tell, best first: the query's ranked hits, or the most important
 * without one. A recent turn is told as a recent turn, not again as the episode kept of it (ADR 0361).
 */
async function bundleCandidates(
  { store }: ServiceContext,
  searchRanked: SearchRanked,
  tenantId: string,
  scope: MemoryScope,
  input: { readonly query?: string | undefined; readonly maxMemories: number },
  events: readonly { readonly id: string }[],
) {
  const recent = new Set(events.map((event) => event.id));
  const ofRecentTurn = (memory: { kind: string; provenance: { eventIds: readonly string[] } }) =>
    memory.kind === "episode" &&
    memory.provenance.eventIds.length > 0 &&
    memory.provenance.eventIds.every((id) => recent.has(id));
  const ranked = input.query
    ? await searchRanked(tenantId, scope, input.query, input.maxMemories, undefined)
    : (
        await store.listMemories(tenantId, scope, {
          statuses: ["active"],
          limit: input.maxMemories,
          order: "importance",
        })
      ).map((memory) => ({ memory, score: memory.importance }));
  return ranked.filter((item) => !ofRecentTurn(item.memory));
}

/** A scope at a glance: its core memory, counts, the newest memories and turns, and its jobs. */
async function unifiedState(
  { store, readBlocks }: ServiceContext,
  tenantId: string,
  request: Parameters<SynthesisOperations["unifiedState"]>[1],
): ReturnType<SynthesisOperations["unifiedState"]> {
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
