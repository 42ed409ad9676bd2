/**
 * The consolidation job: near-duplicate memories of one kind and exact scope merge into the most
 * used one (the others are superseded, never dropped), and stale memories decay, then archive.
 * Every change lands in the memory's history.
 */
import type { z } from "zod";
import type { consolidateRequestSchema } from "../../schemas/admin.ts";
import { pickScope, scopeKey } from "../../scope/memory-scope.ts";
import type { MemoryStore, StoredJob, StoredMemory } from "../../store/memory-store.ts";
import type { ServiceContext } from "../service-context.ts";
import { textSimilarity } from "../text.ts";

type ConsolidateInput = z.output<typeof consolidateRequestSchema>;

type Mutate = ServiceContext["mutateMemory"];

export interface ConsolidationDependencies {
  readonly store: MemoryStore;
  readonly now: () => Date;
  readonly mutateMemory: Mutate;
}

const maximumScanned = 5000;
/** Merges the job's result names (keeper and absorbed ids), so a caller can synthesize the merged text. */
const maximumMergesListed = 50;

function weight(memory: StoredMemory): number {
  return memory.accessCount + 2 * memory.feedback.helpful - 2 * memory.feedback.unhelpful + memory.importance;
}

export async function runConsolidation(job: StoredJob, dependencies: ConsolidationDependencies) {
  const input = job.input as ConsolidateInput;
  const { store, mutateMemory } = dependencies;
  const tenantId = job.tenantId;
  const memories = await store.listMemories(tenantId, pickScope(input), {
    statuses: ["active"],
    limit: maximumScanned,
    order: "accessed",
  });
  const groups = new Map<string, StoredMemory[]>();
  for (const memory of memories) {
    const key = `${memory.kind}\u0000${scopeKey(memory)}`;
    groups.set(key, [...(groups.get(key) ?? []), memory]);
  }
  let merged = 0;
  let superseded = 0;
  const merges: { keeperId: string; absorbedIds: string[] }[] = [];
  const absorbed = new Set<string>();
  for (const group of groups.values()) {
    group.sort((left, right) => weight(right) - weight(left));
    for (const [index, keeper] of group.entries()) {
      if (absorbed.has(keeper.id)) continue;
      const duplicates = group
        .slice(index + 1)
        .filter(
          (other) =>
            !absorbed.has(other.id) &&
            textSimilarity(keeper.content, other.content) >= input.similarityThreshold,
        );
      if (duplicates.length === 0) continue;
      for (const duplicate of duplicates) {
        absorbed.add(duplicate.id);
        await mutateMemory(tenantId, duplicate.id, (current) =>
          current.status !== "active"
            ? undefined
            : {
                next: { ...current, status: "superseded", supersededBy: keeper.id },
                note: { change: "supersede" as never, reason: `merged into ${keeper.id} by job ${job.id}` },
              },
        );
        superseded += 1;
      }
      await mutateMemory(tenantId, keeper.id, (current) => ({
        next: {
          ...current,
          provenance: {
            ...current.provenance,
            source: current.provenance.source,
            eventIds: [
              ...new Set([
                ...current.provenance.eventIds,
                ...duplicates.flatMap((item) => item.provenance.eventIds),
              ]),
            ],
            derivedFrom: [
              ...new Set([...current.provenance.derivedFrom, ...duplicates.map((item) => item.id)]),
            ],
          },
          feedback: {
            helpful:
              current.feedback.helpful + duplicates.reduce((sum, item) => sum + item.feedback.helpful, 0),
            unhelpful:
              current.feedback.unhelpful + duplicates.reduce((sum, item) => sum + item.feedback.unhelpful, 0),
          },
        },
        note: {
          change: "merge" as never,
          reason: `absorbed ${duplicates.length} near-duplicate(s) in job ${job.id}`,
        },
      }));
      merged += 1;
      if (merges.length < maximumMergesListed) {
        merges.push({ keeperId: keeper.id, absorbedIds: duplicates.map((item) => item.id) });
      }
    }
  }
  let decayed = 0;
  let archived = 0;
  const staleBefore = dependencies.now().getTime() - input.staleAfterDays * 86_400_000;
  for (const memory of memories) {
    if (absorbed.has(memory.id)) continue;
    const lastUsed = Math.max(
      Date.parse(memory.updatedAt),
      memory.lastAccessedAt ? Date.parse(memory.lastAccessedAt) : 0,
    );
    if (lastUsed >= staleBefore) continue;
    await mutateMemory(tenantId, memory.id, (current) => {
      if (current.status !== "active") return undefined;
      const importance = Number((current.importance * input.decayFactor).toFixed(6));
      const archive = importance < input.archiveBelow;
      if (archive) archived += 1;
      else decayed += 1;
      return {
        next: { ...current, importance, status: archive ? "archived" : "active" },
        note: {
          change: (archive ? "archive" : "decay") as never,
          reason: `unused for ${input.staleAfterDays}+ days (job ${job.id})`,
        },
      };
    });
  }
  return { scanned: memories.length, merged, superseded, decayed, archived, merges };
}
