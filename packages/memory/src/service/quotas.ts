/**
 * Per-tenant storage quotas (ADR 0538): what one tenant may store, so that a breached key fills its
 * own budget and not the disk every tenant shares. The store keeps each tenant's usage in a counter
 * row changed in every write's transaction; this hands each write its limits and reads them back.
 */
import type { MemoryStore } from "../store/memory-store.ts";
import {
  type HeldLimits,
  type HeldUsage,
  heldKinds,
  type TenantUsage,
  type UsageLimits,
  usageKinds,
} from "../store/tenant-usage.ts";

/** Limits per tenant; `Infinity` switches one off. */
export interface MemoryQuotaOptions {
  /** Memory rows, of any status until purged (default 1,000,000). */
  readonly maxMemories?: number;
  /** UTF-8 bytes of memory content, every version kept (default 1 GiB). */
  readonly maxMemoryBytes?: number;
  /** Conversation events (default 10,000,000). */
  readonly maxEvents?: number;
  /** UTF-8 bytes of event content (default 4 GiB). */
  readonly maxEventBytes?: number;
  /** UTF-8 bytes of knowledge-document chunks (default 1 GiB). */
  readonly maxDocumentBytes?: number;
  /** UTF-8 bytes of metadata as JSON: every memory version, event and document (default 1 GiB; ADR 0556). */
  readonly maxMetadataBytes?: number;
  /** Core-memory blocks over every scope (default 10,000; ADR 0551). */
  readonly maxCoreBlocks?: number;
  /** UTF-8 bytes of core-memory block values over every scope (default 64 MiB). */
  readonly maxCoreBlockBytes?: number;
  /** Jobs queued or running (default 100): each keeps its input until it finishes. */
  readonly maxQueuedJobs?: number;
}

/** Every limit a tenant's writes are held to. */
export type QuotaLimits = UsageLimits & HeldLimits;

const gib = 1024 ** 3;

export const defaultQuotas: QuotaLimits = {
  memories: 1_000_000,
  memoryBytes: gib,
  events: 10_000_000,
  eventBytes: 4 * gib,
  documentBytes: gib,
  metadataBytes: gib,
  coreBlocks: 10_000,
  coreBlockBytes: 64 * 1024 ** 2,
  queuedJobs: 100,
};

const optionNames: { readonly [Kind in keyof QuotaLimits]: keyof MemoryQuotaOptions } = {
  memories: "maxMemories",
  memoryBytes: "maxMemoryBytes",
  events: "maxEvents",
  eventBytes: "maxEventBytes",
  documentBytes: "maxDocumentBytes",
  metadataBytes: "maxMetadataBytes",
  coreBlocks: "maxCoreBlocks",
  coreBlockBytes: "maxCoreBlockBytes",
  queuedJobs: "maxQueuedJobs",
};

export function resolveQuotas(options: MemoryQuotaOptions = {}): QuotaLimits {
  const limits: Record<string, number> = {};
  for (const kind of Object.keys(optionNames) as (keyof QuotaLimits)[]) {
    const name = optionNames[kind];
    const value = options[name] ?? defaultQuotas[kind];
    if (!(value === Number.POSITIVE_INFINITY || (Number.isSafeInteger(value) && value >= 0))) {
      throw new TypeError(`quotas.${name} must be a whole number of 0 or more, or Infinity; got ${value}`);
    }
    limits[kind] = value;
  }
  return limits as unknown as QuotaLimits;
}

/**
 * The store, with the tenant's limits handed to each write that stores content. A delete (a memory
 * moved to `deleted`) is never refused: its history row still counts, but the way out of a full
 * quota must stay open.
 */
export function withQuotas(store: MemoryStore, limits: QuotaLimits): MemoryStore {
  const wrapped: Partial<MemoryStore> = {
    insertMemory: (memory) => store.insertMemory(memory, limits),
    insertMemories: (memories) => store.insertMemories(memories, limits),
    updateMemory: (tenantId, next, expectedVersion, note) =>
      store.updateMemory(
        tenantId,
        next,
        expectedVersion,
        note,
        next.status === "deleted" ? undefined : limits,
      ),
    appendEvent: (event) => store.appendEvent(event, limits),
    appendEvents: (events) => store.appendEvents(events, limits),
    insertDocument: (document, chunks) => store.insertDocument(document, chunks, limits),
    saveBlocks: (tenantId, scope, changes) => store.saveBlocks(tenantId, scope, changes, limits),
    insertJob: (job) => store.insertJob(job, limits),
  };
  return new Proxy(store, {
    get(target, key, receiver) {
      if (typeof key === "string" && Object.hasOwn(wrapped, key)) return wrapped[key as keyof MemoryStore];
      return Reflect.get(target, key, receiver);
    },
  });
}

/** The tenant's usage of every kind against its limits (`null`: no limit). */
export async function quotaUsage(store: MemoryStore, tenantId: string, limits: QuotaLimits) {
  const [counted, held] = await Promise.all([store.usage(tenantId), store.heldUsage(tenantId)]);
  const used: TenantUsage & HeldUsage = { ...counted, ...held };
  return Object.fromEntries(
    [...usageKinds, ...heldKinds].map((kind) => [
      kind,
      { used: used[kind], limit: Number.isFinite(limits[kind]) ? limits[kind] : null },
    ]),
  ) as { [Kind in keyof QuotaLimits]: { used: number; limit: number | null } };
}
