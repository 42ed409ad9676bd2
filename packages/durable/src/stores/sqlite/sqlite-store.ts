/** The default store: one SQLite file through `node:sqlite`, WAL with a full sync on every commit. */
import type { DatabaseSync } from "node:sqlite";
import { openMigratedSqlite, sqliteDialect as sql, sqliteTransaction } from "@tackle/storage";
import type {
  CommitBatch,
  DurableStore,
  Frame,
  JournalRecord,
  RunRecord,
  RunStatus,
} from "../../store/durable-store.ts";
import {
  countedPrefix,
  leaseHeld,
  type OpenLimit,
  type OpenRunsCount,
  openStatuses,
  tooManyOpenRuns,
} from "../../store/durable-store.ts";
import { fromRow, type RunRow, runValues, threadExists, unknownRun } from "../run-row.ts";
import { typedFailures } from "../typed-failures.ts";
import { sqliteMigrations } from "./migrations.ts";
import { applyBatch } from "./sqlite-commit.ts";
import { type DurableStatements, prepareStatements } from "./sqlite-statements.ts";

export interface SqliteStoreOptions {
  /** A file path, or ":memory:". */
  readonly path: string;
  /**
   * `full` (default): every commit is synced to disk, durable across power loss. `normal`: durable
   * across a process crash (SIGKILL), not across power loss; about as fast as the OS cache.
   */
  readonly synchronous?: "full" | "normal";
  /**
   * How long a write waits for the file's write lock while another connection (another process sharing
   * the file) holds it. Default 5000 ms. Past it the call fails `unavailable`, retryable, having written
   * nothing; a drive that meets it leaves its run to a takeover after its lease (ADR 0130).
   */
  readonly busyTimeoutMs?: number;
}

export function createSqliteStore(options: SqliteStoreOptions): DurableStore {
  // Refuses (StorageError "schema_too_new") a file written by a newer version of this store.
  const database = openMigratedSqlite({
    path: options.path,
    synchronous: options.synchronous === "normal" ? "normal" : "full",
    ...(options.busyTimeoutMs === undefined ? {} : { busyTimeoutMs: options.busyTimeoutMs }),
    store: "durable",
    migrations: sqliteMigrations,
  });
  const statements = prepareStatements(database);
  return typedFailures(
    {
      ...reads(statements),
      ...writes(database, statements),
      async recountOpenRuns(): Promise<OpenRunsCount[]> {
        const rows = statements.recountOpen.all() as { prefix: string; counter: number; recounted: number }[];
        return rows.map((row) => ({
          prefix: row.prefix,
          counter: Number(row.counter),
          recounted: Number(row.recounted),
        }));
      },
      async close() {
        if (database.isOpen) database.close();
      },
    },
    sqliteUnavailable,
  );
}

/** What a caller is told when the file stayed locked past the busy timeout under its call (ADR 0130). */
const sqliteUnavailable =
  "Another connection held the SQLite file's write lock past the busy timeout; nothing was written: read the run, or send the call again";

type Reads = Pick<
  DurableStore,
  "getRun" | "readJournal" | "readFrames" | "listThreads" | "findStaleRuns" | "findExpiringRuns"
>;
type Writes = Pick<DurableStore, "createRun" | "claimRun" | "commit" | "deleteThread" | "pruneThreads">;

function reads(statements: DurableStatements): Reads {
  const { selectRun, selectJournal, selectFrames, selectFramesOfTypes, selectThreads, selectSilent } =
    statements;
  const { selectExpiring } = statements;
  return {
    async getRun(threadId) {
      const row = selectRun.get(threadId) as RunRow | undefined;
      return row === undefined ? undefined : fromRow(row);
    },
    async readJournal(threadId) {
      return (selectJournal.all(threadId) as unknown as JournalRecord[]).map((row) => ({
        key: row.key,
        name: row.name,
        state: row.state,
        attempt: Number(row.attempt),
        value: row.value,
      }));
    },
    async readFrames(threadId, afterSeq, limit = 1000, types): Promise<Frame[]> {
      const rows = (
        types === undefined
          ? selectFrames.all(threadId, afterSeq, limit)
          : selectFramesOfTypes.all(threadId, afterSeq, limit, sql.list(types) as string)
      ) as { seq: number; type: string; data: string }[];
      return rows.map((row) => ({ seq: Number(row.seq), type: row.type, data: JSON.parse(row.data) }));
    },
    async listThreads(query = {}) {
      const rows = selectThreads.all(
        query.prefix ?? "",
        query.after ?? "",
        query.limit ?? 100,
      ) as unknown as RunRow[];
      return rows.map(fromRow);
    },
    async findStaleRuns(query) {
      // One file on one machine: the processes sharing it share its clock.
      const before = new Date(Date.now() - query.staleAfterMs).toISOString();
      const rows = selectSilent.all(before, sql.list(query.graphs) as string, query.limit) as {
        thread_id: string;
      }[];
      return rows.map((row) => row.thread_id);
    },
    async findExpiringRuns(query) {
      const after = query.after ?? { expiresAt: Number.MIN_SAFE_INTEGER, threadId: "" };
      const rows = selectExpiring.all(
        query.dueBy,
        sql.list(query.graphs) as string,
        query.limit,
        after.expiresAt,
        after.threadId,
      ) as { thread_id: string; expires_at: number }[];
      return rows.map((row) => ({ threadId: row.thread_id, expiresAt: Number(row.expires_at) }));
    },
  };
}

const isOpen = (status: string | undefined) => openStatuses.includes(status as RunStatus);

/**
 * Counts one more open run under `prefix` and throws `too_many_open_runs` when that passes the bound;
 * inside the write's transaction (`BEGIN IMMEDIATE`: one writer at a time on the file), so the throw
 * rolls the write back, the counter with it, and two writes near the bound take turns (ADR 0127).
 */
function countOpen(statements: DurableStatements, limit: OpenLimit, prefix: string): void {
  const row = statements.countOpen.get(prefix) as { n: number };
  if (Number(row.n) > limit.max) throw tooManyOpenRuns(limit);
}

/**
 * Moves a run's place as its status moved from `was` to `status`, in the write's transaction: an open
 * run that ends gives back the place it was counted under, once (its mark goes with it); an ended run
 * reopened under a limit takes one. A resume, a pause or a takeover moves nothing.
 */
function settleOpen(
  statements: DurableStatements,
  threadId: string,
  was: { status: string; open_prefix?: string | null | undefined },
  status: string,
  limit: OpenLimit | undefined,
): void {
  if (isOpen(was.status) && !isOpen(status)) {
    if (was.open_prefix === null || was.open_prefix === undefined) return;
    statements.markOpen.run(threadId, null);
    statements.uncountOpen.run(was.open_prefix, 1);
  } else if (!isOpen(was.status) && isOpen(status)) {
    const prefix = countedPrefix(limit, threadId);
    if (prefix === null || limit === undefined) return;
    statements.markOpen.run(threadId, prefix);
    countOpen(statements, limit, prefix);
  }
}

/** Each write one transaction: a commit lands whole or not at all. */
function writes(database: DatabaseSync, statements: DurableStatements): Writes {
  const { insertRun, selectRun, selectLastSeq, deleteRun, deleteJournal, deleteFrames, selectStale } =
    statements;
  return {
    async createRun(record: RunRecord, batch: CommitBatch = {}, options = {}) {
      const limit = options.openLimit;
      const prefix = isOpen(batch.run?.status ?? record.status)
        ? countedPrefix(limit, record.threadId)
        : null;
      sqliteTransaction(database, () => {
        try {
          insertRun.run(...runValues(record), prefix);
        } catch (error) {
          if (/UNIQUE|PRIMARY KEY/.test((error as Error).message)) {
            throw threadExists(record.threadId, error);
          }
          throw error;
        }
        applyBatch(database, statements, record.threadId, batch, record.owner);
        if (prefix !== null && limit !== undefined) countOpen(statements, limit, prefix);
      });
    },
    async claimRun(threadId, owner, fromStatus: readonly RunStatus[], batch = {}, options = {}) {
      return sqliteTransaction(database, () => {
        const row = selectRun.get(threadId) as RunRow | undefined;
        if (row === undefined) throw unknownRun(threadId);
        if (!fromStatus.includes(row.status as RunStatus)) return undefined;
        if (options.ifOwner !== undefined && row.owner !== options.ifOwner) return undefined;
        // One file on one machine: the processes sharing it share its clock.
        const silentForMs = Date.now() - Date.parse(row.updated_at);
        const lease = options.staleAfterMs ?? 0;
        if (lease > 0 && silentForMs < lease) throw leaseHeld(threadId, silentForMs, lease);
        applyBatch(database, statements, threadId, { ...batch, run: { ...batch.run, owner } }, row.owner);
        // A claim that opens an ended thread's next run takes a place; a resume or takeover keeps its own.
        settleOpen(statements, threadId, row, batch.run?.status ?? row.status, options.openLimit);
        const run = fromRow(selectRun.get(threadId) as unknown as RunRow);
        const lastSeq = Number((selectLastSeq.get(threadId) as { seq: number }).seq);
        return { run, lastSeq };
      });
    },
    async commit(threadId, owner, batch) {
      sqliteTransaction(database, () => {
        // Only a write that ends the run can move its place: read what it held first.
        const status = batch.run?.status;
        const was =
          status === undefined || isOpen(status)
            ? undefined
            : (statements.selectOpenPrefix.get(threadId) as { status: string; open_prefix: string | null });
        applyBatch(database, statements, threadId, batch, owner);
        if (was !== undefined && status !== undefined)
          settleOpen(statements, threadId, was, status, undefined);
      });
    },
    async deleteThread(threadId) {
      return sqliteTransaction(database, () => {
        deleteJournal.run(threadId);
        deleteFrames.run(threadId);
        const gone = deleteRun.get(threadId) as { open_prefix: string | null } | undefined;
        if (gone?.open_prefix != null) statements.uncountOpen.run(gone.open_prefix, 1);
        return gone !== undefined;
      });
    },
    async pruneThreads(query) {
      return sqliteTransaction(database, () => {
        const stale = selectStale.all(query.prefix ?? "", query.updatedBefore, query.limit ?? -1) as {
          thread_id: string;
          status: string;
          open_prefix: string | null;
        }[];
        const pruned: string[] = [];
        const freed = new Map<string, number>();
        for (const row of stale) {
          if (!query.statuses.includes(row.status as RunStatus)) continue;
          deleteJournal.run(row.thread_id);
          deleteFrames.run(row.thread_id);
          deleteRun.get(row.thread_id);
          pruned.push(row.thread_id);
          if (row.open_prefix !== null) freed.set(row.open_prefix, (freed.get(row.open_prefix) ?? 0) + 1);
        }
        for (const [prefix, n] of freed) statements.uncountOpen.run(prefix, n);
        return pruned;
      });
    },
  };
}
