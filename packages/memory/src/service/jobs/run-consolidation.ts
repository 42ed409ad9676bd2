/**
 * The consolidation job: near-duplicate memories of one kind and exact scope merge into the most
 * used one (the others are superseded, never dropped), and stale memories decay, then archive.
 * Every change lands in the memory's history. A memory purged while the job runs is skipped; a purge
 * of the job's own scope stops it (ADR 0564).
 */
import type { z } from "zod";
import { MemoryError } from "../../errors/memory-error.ts";
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

/**
 * Changes one memory through `mutateMemory`; answers false for a memory purged since the job listed
 * it (ADR 0564), which the job skips. When the job's own record is gone too, a purge of its scope
 * deleted it: the job stops as a purged import does (ADR 0561), writing nothing more.
 */
function changer(job: StoredJob, { store, mutateMemory }: ConsolidationDependencies) {
  return async (id: string, change: Parameters<Mutate>[2]): Promise<boolean> => {
    try {
      await mutateMemory(job.tenantId, id, change);
      return true;
    } catch (error) {
      const failure = error as { data?: { resource?: unknown; id?: unknown } };
      const purged =
        MemoryError.isInstance(error) &&
        error.code === "not_found" &&
        failure.data?.resource === "memory" &&
        failure.data.id === id;
      if (!purged) throw error;
      if (!(await store.jobRunning(job.tenantId, job.id))) throw MemoryError.notFound("Job", job.id);
      return false;
    }
  };
}

type Change = ReturnType<typeof changer>;

/** What merging `duplicates` into it makes of the keeper: their events, ids and feedback. */
function absorb(current: StoredMemory, duplicates: readonly StoredMemory[]): StoredMemory {
  return {
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
      derivedFrom: [...new Set([...current.provenance.derivedFrom, ...duplicates.map((item) => item.id)])],
    },
    feedback: {
      helpful: current.feedback.helpful + duplicates.reduce((sum, item) => sum + item.feedback.helpful, 0),
      unhelpful:
        current.feedback.unhelpful + duplicates.reduce((sum, item) => sum + item.feedback.unhelpful, 0),
    },
  };
}

/** Near-duplicates of one kind and exact scope merge into the most used one; answers what it did. */
async function mergeGroups(job: StoredJob, memories: readonly StoredMemory[], change: Change) {
  const input = job.input as ConsolidateInput;
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
      const taken: StoredMemory[] = [];
      for (const duplicate of duplicates) {
        absorbed.add(duplicate.id);
        const changed = await change(duplicate.id, (current) =>
          current.status !== "active"
            ? undefined
            : {
                next: { ...current, status: "superseded", supersededBy: keeper.id },
                note: { change: "supersede" as never, reason: `merged into ${keeper.id} by job ${job.id}` },
              },
        );
        if (changed) taken.push(duplicate);
      }
      // A group shares one exact scope: a purge took all of it or none, so the keeper is there.
      if (taken.length === 0) continue;
      superseded += taken.length;
      const kept = await change(keeper.id, (current) => ({
        next: absorb(current, taken),
        note: {
          change: "merge" as never,
          reason: `absorbed ${taken.length} near-duplicate(s) in job ${job.id}`,
        },
      }));
      if (!kept) continue;
      merged += 1;
      if (merges.length < maximumMergesListed) {
        merges.push({ keeperId: keeper.id, absorbedIds: taken.map((item) => item.id) });
      }
    }
  }
  return { merged, superseded, merges, absorbed };
}

/** Stale memories lose importance, then archive; answers how many of each. */
async function decayStale(
  job: StoredJob,
  memories: readonly StoredMemory[],
  absorbed: ReadonlySet<string>,
  now: Date,
  change: Change,
) {
  const input = job.input as ConsolidateInput;
  let decayed = 0;
  let archived = 0;
  const staleBefore = now.getTime() - input.staleAfterDays * 86_400_000;
  for (const memory of memories) {
    if (absorbed.has(memory.id)) continue;
    const lastUsed = Math.max(
      Date.parse(memory.updatedAt),
      memory.lastAccessedAt ? Date.parse(memory.lastAccessedAt) : 0,
    );
    if (lastUsed >= staleBefore) continue;
    // Counted once the change is stored: a retried change runs its function again.
    let outcome: "decay" | "archive" | undefined;
    const changed = await change(memory.id, (current) => {
      outcome = undefined;
      if (current.status !== "active") return undefined;
      const importance = Number((current.importance * input.decayFactor).toFixed(6));
      outcome = importance < input.archiveBelow ? "archive" : "decay";
      return {
        next: { ...current, importance, status: outcome === "archive" ? "archived" : "active" },
        note: {
          change: outcome as never,
          reason: `unused for ${input.staleAfterDays}+ days (job ${job.id})`,
        },
      };
    });
    if (changed && outcome === "archive") archived += 1;
    else if (changed && outcome === "decay") decayed += 1;
  }
  return { decayed, archived };
}

export async function runConsolidation(job: StoredJob, dependencies: ConsolidationDependencies) {
  const input = job.input as ConsolidateInput;
  const memories = await dependencies.store.listMemories(job.tenantId, pickScope(input), {
    statuses: ["active"],
    limit: maximumScanned,
    order: "accessed",
  });
  const change = changer(job, dependencies);
  const { merged, superseded, merges, absorbed } = await mergeGroups(job, memories, change);
  const { decayed, archived } = await decayStale(job, memories, absorbed, dependencies.now(), change);
  return { scanned: memories.length, merged, superseded, decayed, archived, merges };
}
