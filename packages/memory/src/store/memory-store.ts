/** The storage interface both stores (SQLite, PostgreSQL) implement; every method takes the tenant. */

import type { MemoryJob, RetrievalTrace } from "../schemas/admin.ts";
import type { MemoryEvent } from "../schemas/event.ts";
import type { KnowledgeDocument } from "../schemas/knowledge.ts";
import type { Memory, MemoryKind, MemoryStatus, MemoryVersion } from "../schemas/memory.ts";
import type { MemoryCounts } from "../schemas/synthesis.ts";
import type { MemoryScope } from "../scope/memory-scope.ts";
import type { HeldLimits, HeldUsage, TenantUsage, UsageLimits } from "./tenant-usage.ts";

/** A memory as stored: the API shape plus what never leaves the service. */
export interface StoredMemory extends Memory {
  readonly tenantId: string;
  /** Duplicate key: the normalized content hash, or the id when duplicates were allowed. */
  readonly dedupeKey: string;
  readonly embedding?: Float32Array;
  /**
   * The bytes this version's metadata is charged against `metadataBytes` (ADR 0563): what the caller
   * sent, none for what the service wrote itself (an event's episode's speaker and role). A change
   * that keeps the metadata (`{ ...current }`) keeps its charge; absent, the metadata's JSON bytes.
   */
  readonly metadataCharge?: number;
}

export interface StoredEvent extends MemoryEvent {
  readonly tenantId: string;
  /**
   * Order of arrival in the store, across every tenant: never answered to a caller, since its gaps
   * would count the other tenants' events.
   */
  readonly seq: number;
  /** What the event's metadata is charged (ADR 0563): an import's own metadata none; absent, its JSON bytes. */
  readonly metadataCharge?: number;
}

export interface StoredDocument extends KnowledgeDocument {
  readonly tenantId: string;
}

export interface StoredChunk {
  readonly id: string;
  readonly ordinal: number;
  readonly content: string;
}

export interface StoredBlock {
  readonly label: string;
  readonly value: string;
  readonly limit: number;
  readonly version: number;
  readonly updatedAt: string;
}

export interface StoredTrace extends RetrievalTrace {
  readonly tenantId: string;
}

export interface StoredJob extends MemoryJob {
  readonly tenantId: string;
}

export interface HistoryNote {
  readonly change: MemoryVersion["change"];
  readonly reason?: string;
}

export interface ListMemoriesOptions {
  readonly statuses?: readonly MemoryStatus[];
  readonly kinds?: readonly MemoryKind[];
  readonly limit: number;
  /** `written`: the latest written first (write order, stable while others write). */
  readonly order: "recent" | "accessed" | "importance" | "written";
  /** With `written`: only memories written before this one (a page's cursor). */
  readonly beforeId?: string;
}

/** What `memoryChanges` answers. */
export interface MemoryChanges {
  readonly stamp: number;
  readonly removed: number;
  /** With each memory its place in write order (the store's sequence number). */
  readonly rows: readonly { readonly seq: number; readonly memory: StoredMemory }[];
}

export interface ListEventsOptions {
  readonly order: "asc" | "desc";
  readonly limit: number;
  /**
   * Continue after this sequence number in the chosen order. Oldest first, within a session, it never
   * passes an event that commits later: a session's events commit in the order of their numbers
   * (ADR 0535). Across sessions numbers can commit out of order; the service pages only a session.
   */
  readonly cursor?: number;
}

export interface AccessRecord {
  readonly kind: "search" | "hit" | "read";
  readonly scope: MemoryScope;
  readonly memoryIds: readonly string[];
  readonly at: string;
}

export interface AccessDay {
  readonly day: string;
  readonly searches: number;
  readonly hits: number;
  readonly reads: number;
}

export interface TenantCounts {
  readonly memories: number;
  readonly events: number;
  readonly documents: number;
  readonly traces: number;
  readonly jobs: number;
}

/** Memories: records with versions and history, BM25 search, neighbouring turns, access statistics. */
export interface MemoryRecordStore {
  /** Inserts, or answers the active memory in the same exact scope with the same dedupe key. */
  /**
   * Every write below adds what it stored to the tenant's usage in its transaction (ADR 0538); given
   * `limits`, one that would pass them throws `quota_exceeded` and stores nothing.
   */
  insertMemory(
    memory: StoredMemory,
    limits?: UsageLimits,
  ): Promise<{ memory: StoredMemory; created: boolean }>;
  /** `insertMemory` for many, in one transaction: all stored (or answered as duplicates), or none. */
  insertMemories(
    memories: readonly StoredMemory[],
    limits?: UsageLimits,
  ): Promise<{ memory: StoredMemory; created: boolean }[]>;
  getMemories(tenantId: string, ids: readonly string[]): Promise<StoredMemory[]>;
  /**
   * For each id, the active memories of the same exact scope written just before and after it (up to
   * `window` each side, in write order, however far apart they were written): a conversation
   * turn's neighbouring turns.
   */
  neighbourMemories(
    tenantId: string,
    ids: readonly string[],
    window: number,
  ): Promise<Map<string, { memory: StoredMemory; offset: number }[]>>;
  /**
   * Writes `next` (whose version is one above `expectedVersion`) only if the stored version is still
   * `expectedVersion`, and appends its history row. False when another writer got there first.
   */
  updateMemory(
    tenantId: string,
    next: StoredMemory,
    expectedVersion: number,
    note: HistoryNote,
    limits?: UsageLimits,
  ): Promise<boolean>;
  memoryHistory(tenantId: string, id: string): Promise<MemoryVersion[]>;
  listMemories(tenantId: string, scope: MemoryScope, options: ListMemoriesOptions): Promise<StoredMemory[]>;
  /**
   * BM25 over active memories (FTS5 on SQLite, computed in SQL on PostgreSQL); higher is better.
   * `terms` are words ORed; a term ending in `*` is a prefix. Stores keep only letters and digits of
   * each term, so no text handed here is ever query syntax.
   */
  searchMemories(
    tenantId: string,
    scope: MemoryScope,
    terms: readonly string[],
    options: {
      readonly limit: number;
      readonly kinds?: readonly MemoryKind[];
      /**
       * `bm25` (default): BM25 over the scope's own statistics. `candidates`: the index's own
       * order, cheaper, for callers that judge the hits themselves (the novelty check).
       */
      readonly order?: "bm25" | "candidates";
      /** Only memories holding every term (default: any). */
      readonly every?: boolean;
    },
  ): Promise<{ memory: StoredMemory; score: number }[]>;
  /**
   * For each query, up to `limit` active memories of the scope holding any of its terms (every term
   * with `every`), best matches first: the novelty check of a batch of writes in one round trip.
   */
  candidateMemories(
    tenantId: string,
    scope: MemoryScope,
    queries: readonly { readonly terms: readonly string[]; readonly every: boolean }[],
    options: { readonly limit: number; readonly kinds?: readonly MemoryKind[] },
  ): Promise<StoredMemory[][]>;
  /**
   * A value that changes whenever any of the tenant's memories is written, deleted or reweighed
   * (access counts aside), and never returns to an earlier value: the service keeps a scope's
   * memories in process while it holds. 0 before the tenant's first memory.
   */
  memoryGeneration?(tenantId: string): Promise<number | string>;
  /**
   * The scope's memories changed since the tenant's change stamp `since` (ADR 0541), for a snapshot
   * kept in process to catch up in time proportional to the change. Without `since`: the active
   * memories, latest written first. With it: every memory of the scope (any status) whose last
   * change is stamped after `since`. Up to `limit` either way. `stamp` is the tenant's stamp, read
   * before the rows: every row stamped at or below it is among those a later call answers (a
   * tenant's stamps rise in commit order). `removed`: the stamp of the tenant's last memory deleted
   * or moved to another scope (a deleted row is not answered, nor a moved one in the scope it left:
   * a snapshot older than `removed` reads its scope again).
   */
  memoryChanges?(
    tenantId: string,
    scope: MemoryScope,
    options: { readonly since?: number; readonly limit: number },
  ): Promise<MemoryChanges>;
  /** Active memories in scope that carry an embedding (for vector similarity in the service). */
  embeddedMemories(
    tenantId: string,
    scope: MemoryScope,
    kinds?: readonly MemoryKind[],
  ): Promise<StoredMemory[]>;
  countMemories(tenantId: string, scope: MemoryScope): Promise<MemoryCounts>;
  /** How many active memories were read or returned at least once (`accessCount` above 0), counted in the store. */
  countAccessedMemories(tenantId: string, scope: MemoryScope): Promise<number>;
  /** Adds one to the count of the access's day, kind, scope and each memory (ADR 0537); hits and reads count on the memories too. */
  recordAccess(tenantId: string, access: AccessRecord): Promise<void>;
  /** The counts of each day from `sinceDay`, summed over the scopes inside `scope`. */
  accessTrends(tenantId: string, scope: MemoryScope, sinceDay: string): Promise<AccessDay[]>;
  /** The searches counted inside `scope`, over the days kept. */
  countSearches(tenantId: string, scope: MemoryScope): Promise<number>;
}

/** The append-only conversation log. */
export interface EventStore {
  /** Appends, or answers the event already stored under the same custom id. */
  appendEvent(
    event: Omit<StoredEvent, "seq">,
    limits?: UsageLimits,
  ): Promise<{ event: StoredEvent; created: boolean }>;
  /** `appendEvent` for many, in one transaction and in order: each answered as `appendEvent` would. */
  appendEvents(
    events: readonly Omit<StoredEvent, "seq">[],
    limits?: UsageLimits,
  ): Promise<{ event: StoredEvent; created: boolean }[]>;
  listEvents(tenantId: string, scope: MemoryScope, options: ListEventsOptions): Promise<StoredEvent[]>;
  getEvents(tenantId: string, ids: readonly string[]): Promise<StoredEvent[]>;
  countEvents(tenantId: string, scope: MemoryScope): Promise<number>;
}

/** Knowledge-base documents and their chunks. */
export interface DocumentStore {
  /** Inserts a document and its chunks, or answers the one with the same content in the same scope. */
  insertDocument(
    document: StoredDocument,
    chunks: readonly StoredChunk[],
    limits?: UsageLimits,
  ): Promise<{ document: StoredDocument; created: boolean }>;
  getDocument(tenantId: string, id: string): Promise<StoredDocument | undefined>;
  searchChunks(
    tenantId: string,
    scope: MemoryScope,
    terms: readonly string[],
    limit: number,
  ): Promise<{ chunk: StoredChunk; document: StoredDocument; score: number }[]>;
  countDocuments(tenantId: string, scope: MemoryScope): Promise<number>;
}

/** Core-memory blocks of a scope. */
export interface CoreMemoryStore {
  getBlocks(tenantId: string, scope: MemoryScope): Promise<StoredBlock[]>;
  /** All or nothing: each block is written only if its stored version is `expectedVersion` (0: new). */
  saveBlocks(
    tenantId: string,
    scope: MemoryScope,
    changes: readonly { readonly block: StoredBlock; readonly expectedVersion: number }[],
    /** When given, a save that grows the tenant's blocks past them throws `quota_exceeded` (ADR 0551). */
    limits?: HeldLimits,
  ): Promise<boolean>;
}

/** Retrieval traces. */
export interface TraceStore {
  /** Records a retrieval trace and adds its accesses to their counts, in one transaction. */
  insertTrace(trace: StoredTrace, accesses: readonly AccessRecord[]): Promise<void>;
  getTrace(tenantId: string, id: string): Promise<StoredTrace | undefined>;
  listTraces(
    tenantId: string,
    scope: MemoryScope,
    options: { readonly operation?: string; readonly limit: number },
  ): Promise<StoredTrace[]>;
}

/** Jobs (imports, consolidation, novelty scans). */
export interface JobStore {
  /** When given, a queued job past the tenant's `queuedJobs` throws `quota_exceeded` (ADR 0551). */
  insertJob(job: StoredJob, limits?: HeldLimits): Promise<void>;
  /** A finished job's input is dropped (stored as `null`); its outcome stays (ADR 0551). */
  updateJob(job: StoredJob): Promise<void>;
  /**
   * Moves a job to `running` if it is still `queued`, or `running` but started before `orphanedBefore`
   * (left by a stopped process). False when another process claimed it first.
   */
  claimJob(tenantId: string, id: string, startedAt: string, orphanedBefore: string): Promise<boolean>;
  /**
   * Present on stores several processes share (PostgreSQL): any process claims the next job with a
   * lease judged by the database's clock, renews it while it works, and finishes it only while it
   * still holds it. A process that dies mid-job loses its lease and another process takes the job.
   */
  readonly jobLeases?: JobLeases;
  getJob(tenantId: string, id: string): Promise<StoredJob | undefined>;
  /**
   * Whether the job is still stored and running: one read by its id (not its input). A job's write
   * asks inside its transaction, after its rows, and rolls back when a purge deleted the job (ADR 0561).
   */
  jobRunning(tenantId: string, id: string): Promise<boolean>;
  listJobs(
    tenantId: string,
    scope: MemoryScope,
    options: { readonly type?: string; readonly status?: string; readonly limit: number },
  ): Promise<StoredJob[]>;
  /** Jobs of every tenant left queued or running (by a process that stopped), oldest first. */
  unfinishedJobs(): Promise<StoredJob[]>;
}

/** What a sweep of expired records deletes: each before its own cutoff, of every tenant. */
export interface ExpiryCutoffs {
  /** Traces created before this instant. */
  readonly tracesBefore: string;
  /** Finished jobs that finished before this instant (an import job an event names is kept). */
  readonly jobsFinishedBefore: string;
  /** Access records of days before this one (`YYYY-MM-DD`). */
  readonly accessBeforeDay: string;
}

/**
 * Retention (ADRs 0537, 0545): each call deletes at most `limit` rows per table in one statement and
 * answers how many, so the service deletes a backlog in batches with other work between them. A
 * finished import job that an event names is never deleted: it is that event's and its memories'
 * provenance (`chainTrace` reads it), kept until they are purged. A cut counts the tenant's rows, or
 * with `userId` one identity's: that user's rows, or with `null` the rows that name no user.
 */
export interface RetentionStore {
  /** Deletes up to `limit` of the tenant's (or the user's) traces beyond the newest `keep`. */
  pruneTraces(tenantId: string, keep: number, limit: number, userId?: string | null): Promise<number>;
  /**
   * Deletes up to `limit` of the tenant's (or the user's) finished jobs beyond the newest `keep` of
   * those that may go.
   */
  pruneJobs(tenantId: string, keep: number, limit: number, userId?: string | null): Promise<number>;
  /** Deletes up to `limit` expired traces, finished jobs and access records each, of every tenant. */
  expireRecords(
    cutoffs: ExpiryCutoffs,
    limit: number,
  ): Promise<{ traces: number; jobs: number; accessRecords: number }>;
}

/** A write's idempotency key and the answer its write gave, committed together with the write. */
export interface IdempotencyRecord {
  readonly tenantId: string;
  readonly key: string;
  /** A hash of the operation and its request: the same key with another request is refused. */
  readonly fingerprint: string;
  /**
   * The first answer's JSON. Absent only on a claim left by an earlier version of this store, which
   * recorded the key before its write; such a record is held until it expires.
   */
  readonly answer?: string;
  readonly createdAt: string;
  readonly expiresAt: string;
  /** The identity the write was made for (its request's scope fields): a purge of that scope deletes it. */
  readonly scope?: MemoryScope;
}

/** Idempotency keys of writes, per tenant, each kept until it expires. */
export interface IdempotencyStore {
  /** The record of a key that has not expired at `now`. */
  findIdempotencyKey(tenantId: string, key: string, now: string): Promise<IdempotencyRecord | undefined>;
  /**
   * Records a key with its answer, replacing an expired record; false when a record that has not
   * expired holds the key (another writer's, committed first). Called inside the write's
   * `withTransaction`, so the key and the write commit together or not at all; on PostgreSQL a
   * concurrent transaction recording the same key waits here for the first to end.
   */
  recordIdempotencyKey(record: Required<IdempotencyRecord>): Promise<boolean>;
  /** Deletes the records of every tenant that expired at `now` or before; answers how many. */
  sweepIdempotencyKeys(now: string): Promise<number>;
}

/** How many records of each kind a purge deleted. */
export interface PurgeCounts {
  readonly memories: number;
  readonly versions: number;
  readonly events: number;
  readonly documents: number;
  readonly chunks: number;
  readonly coreBlocks: number;
  readonly traces: number;
  readonly jobs: number;
  readonly accessRecords: number;
  readonly idempotencyKeys: number;
}

/** Hard deletion (ADR 0365): every record of a scope, gone from the tables and their full-text indexes. */
export interface PurgeStore {
  /**
   * Deletes, in one transaction, every record of `tenantId` inside `scope` (each field given must
   * match; at least one is given): memories and their versions, access records, events, documents
   * and chunks, core blocks, traces, jobs and the idempotency answers of writes made for the scope.
   */
  purgeScope(tenantId: string, scope: MemoryScope): Promise<PurgeCounts>;
}

/**
 * One transaction around several store calls: every call this store gets from inside `body` (its
 * async context) joins it. A method that is a transaction of its own becomes a savepoint in it.
 */
export interface UnitOfWork {
  /**
   * Runs `body` in one transaction: committed when it resolves, rolled back when it throws or the
   * process dies before the commit (nothing of it is then stored). Calls from outside wait on SQLite
   * while it writes (one connection); on PostgreSQL they run beside it and see it once committed.
   * A call from inside a unit joins that unit.
   */
  withTransaction<T>(body: () => Promise<T>): Promise<T>;
  /**
   * Runs `callback` outside any unit, soon after the calling context's unit commits (never if it
   * rolls back), or soon when called outside a unit: for work that must see what the unit wrote,
   * such as running a job it queued.
   */
  afterCommit(callback: () => void): void;
}

/** Stores answer only inside `tenantId` AND the scope given; a store never widens either. */
export interface MemoryStore
  extends MemoryRecordStore,
    EventStore,
    DocumentStore,
    CoreMemoryStore,
    TraceStore,
    JobStore,
    IdempotencyStore,
    PurgeStore,
    RetentionStore,
    UnitOfWork {
  readonly kind: "sqlite" | "postgres";
  close(): Promise<void>;

  /** The tenant's counts, or only those inside `scope` (every field given). */
  counts(tenantId: string, scope?: MemoryScope): Promise<TenantCounts>;
  /** What the tenant has stored, from its counter row (ADR 0538). */
  usage(tenantId: string): Promise<TenantUsage>;
  /** What the tenant holds of the kinds counted from its rows: core blocks, their bytes, jobs waiting (ADR 0551). */
  heldUsage(tenantId: string): Promise<HeldUsage>;
}

export interface JobLeases {
  /** How long a claim lasts without a renewal. */
  readonly leaseMs: number;
  /**
   * Claims the oldest queued job, or a running one whose lease ran out or is `owner`'s own (skipping
   * rows others hold). The caller claims only while it runs no job: one leased to itself is a job
   * whose claim's answer it lost, or whose outcome it could not write.
   */
  claimNext(owner: string, startedAt: string): Promise<StoredJob | undefined>;
  /** Extends the lease; false when `owner` no longer holds the job. */
  renew(job: StoredJob, owner: string): Promise<boolean>;
  /** Writes the job's final state only while `owner` holds it; false when it was lost. */
  finish(job: StoredJob, owner: string): Promise<boolean>;
}
