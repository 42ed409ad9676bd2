/** The scale-out store: PostgreSQL through `pg`, one transaction per commit, fenced by the owner token. */
import { checkTablePrefix, postgresDialect } from "@tackle/storage";
import type { postgresTransaction as PostgresTransactionFn } from "@tackle/storage/postgres";
import type pg from "pg";
import type {
  CommitBatch,
  DurableStore,
  Frame,
  JournalRecord,
  RunRecord,
  RunStatus,
} from "../../store/durable-store.ts";
import {
  leaseHeld,
  type OpenLimit,
  openStatuses,
  prefixEnd,
  tooManyOpenRuns,
} from "../../store/durable-store.ts";
import { fromRow, type RunRow, runColumns, runValues, threadExists, unknownRun } from "../run-row.ts";
import { migrationStore, postgresMigrations } from "./migrations.ts";
import { applyBatch, type DurableTables, durableTables } from "./postgres-commit.ts";

export interface PostgresStoreOptions {
  /** A pool you own (closed by you), or a connection string (the store opens and closes its pool). */
  readonly pool?: pg.Pool;
  readonly connectionString?: string;
  /** Table name prefix; default `durable_`. */
  readonly tablePrefix?: string;
  /** Pool size when the store opens the pool (default 4). */
  readonly maxConnections?: number;
  /**
   * Errors of idle pooled connections (the server restarted, a connection was terminated). The pool
   * replaces them; without a handler Node would crash. Default: a process warning.
   */
  readonly onError?: (error: Error) => void;
}

const sql = postgresDialect;

/**
 * Opens the store and brings its tables to the newest schema version (under the migration lock, so
 * processes starting at once take turns). Refuses (StorageError "schema_too_new") tables migrated by
 * a newer version of this store.
 */
export async function createPostgresStore(options: PostgresStoreOptions): Promise<DurableStore> {
  const prefix = checkTablePrefix(options.tablePrefix ?? "durable_", "@tackle/durable postgres");
  const { migratePostgres, openPostgres, postgresTransaction } = await import("@tackle/storage/postgres");
  const handle = openPostgres({
    pool: options.pool,
    connectionString: options.connectionString,
    max: options.maxConnections ?? 4,
    label: "@tackle/durable postgres",
    ...(options.onError === undefined ? {} : { onError: options.onError }),
  });
  try {
    await migratePostgres(handle.pool, {
      store: migrationStore(prefix),
      migrations: postgresMigrations(prefix),
    });
  } catch (error) {
    await handle.close();
    throw error;
  }
  const tables = durableTables(prefix);
  return {
    ...reads(handle.pool, tables),
    ...writes(handle.pool, tables, postgresTransaction),
    async close() {
      await handle.close();
    },
  };
}

type Reads = Pick<
  DurableStore,
  "getRun" | "readJournal" | "readFrames" | "listThreads" | "findStaleRuns" | "findExpiringRuns"
>;
type Writes = Pick<DurableStore, "createRun" | "claimRun" | "commit" | "deleteThread" | "pruneThreads">;

/** What the store reads: one statement each, outside any transaction. */
function reads(database: pg.Pool, { runs, journal, frames }: DurableTables): Reads {
  return {
    async getRun(threadId) {
      const result = await database.query<RunRow>(`SELECT * FROM ${runs} WHERE thread_id = $1`, [threadId]);
      const row = result.rows[0];
      return row === undefined ? undefined : fromRow(row);
    },
    async readJournal(threadId): Promise<JournalRecord[]> {
      const result = await database.query(
        `SELECT key, name, state, attempt, value FROM ${journal} WHERE thread_id = $1`,
        [threadId],
      );
      return result.rows.map((row) => ({
        key: row.key,
        name: row.name,
        state: row.state,
        attempt: Number(row.attempt),
        value: row.value,
      }));
    },
    async readFrames(threadId, afterSeq, limit = 1000, types): Promise<Frame[]> {
      const result =
        types === undefined
          ? await database.query(
              `SELECT seq, type, data FROM ${frames} WHERE thread_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
              [threadId, afterSeq, limit],
            )
          : await database.query(
              `SELECT seq, type, data FROM ${frames} WHERE thread_id = $1 AND seq > $2 AND ${sql.anyOf("type", 4)}
               ORDER BY seq LIMIT $3`,
              [threadId, afterSeq, limit, sql.list(types)],
            );
      return result.rows.map((row) => ({ seq: Number(row.seq), type: row.type, data: row.data }));
    },
    async listThreads(query = {}) {
      const result = await database.query<RunRow>(
        `SELECT * FROM ${runs} WHERE ${sql.startsWith("thread_id", 1)} AND thread_id > $2
         ORDER BY thread_id COLLATE "C" LIMIT $3`,
        [query.prefix ?? "", query.after ?? "", query.limit ?? 100],
      );
      return result.rows.map(fromRow);
    },
    async findStaleRuns(query) {
      // ISO text in one format orders as time does; the cut-off is the database's now, never this machine's,
      // computed once (a sub-select) so it bounds the scan of the running-runs index (migration 2).
      const result = await database.query<{ thread_id: string }>(
        `SELECT thread_id FROM ${runs} WHERE status = 'running' AND ${sql.anyOf("graph", 2)}
         AND updated_at <= (SELECT to_char((clock_timestamp() - $1 * interval '1 millisecond') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
         ORDER BY updated_at LIMIT $3`,
        [query.staleAfterMs, sql.list(query.graphs), query.limit],
      );
      return result.rows.map((row) => row.thread_id);
    },
    async findExpiringRuns(query) {
      // Paused runs' expiries due by $1, soonest first, after ($4, $5) in that order (migration 4's index).
      const after = query.after ?? { expiresAt: Number.MIN_SAFE_INTEGER, threadId: "" };
      const result = await database.query<{ thread_id: string; expires_at: string }>(
        `SELECT thread_id, expires_at FROM ${runs} WHERE status = 'paused' AND expires_at IS NOT NULL
         AND expires_at <= $1 AND ${sql.anyOf("graph", 2)}
         AND (expires_at, thread_id COLLATE "C") > ($4::bigint, $5::text COLLATE "C")
         ORDER BY expires_at, thread_id COLLATE "C" LIMIT $3`,
        [query.dueBy, sql.list(query.graphs), query.limit, after.expiresAt, after.threadId],
      );
      return result.rows.map((row) => ({ threadId: row.thread_id, expiresAt: Number(row.expires_at) }));
    },
  };
}

/**
 * Takes the prefix's open-runs lock for the rest of the transaction (a transaction-scoped advisory lock,
 * keyed by the table and the prefix): writes that may open a run in one prefix take their turns to
 * count, so each counts the others' committed rows (ADR 0123). Taken after the write's own rows and
 * followed only by the count and the commit (ADR 0125): a holder never waits on a lock, so the turns
 * last a count each, and a claim that keeps its run open takes none.
 */
async function lockOpen(client: pg.PoolClient, runs: string, limit: OpenLimit | undefined): Promise<void> {
  if (limit === undefined) return;
  await client.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [
    `${runs}:open:${limit.prefix}`,
  ]);
}

/** Throws `too_many_open_runs` when the prefix holds more open runs than its bound, this write's among them. */
async function checkOpen(
  client: pg.PoolClient,
  runs: string,
  limit: OpenLimit | undefined,
  threadId: string,
): Promise<void> {
  if (limit === undefined || !threadId.startsWith(limit.prefix)) return;
  const end = prefixEnd(limit.prefix);
  const range = end === undefined ? "" : `AND thread_id COLLATE "C" >= $2 AND thread_id COLLATE "C" < $3`;
  const result = await client.query<{ n: string }>(
    `SELECT count(*) AS n FROM (SELECT 1 FROM ${runs} WHERE status IN ('running', 'paused') ${range}
     LIMIT $1) open_runs`,
    end === undefined ? [limit.max + 1] : [limit.max + 1, limit.prefix, end],
  );
  if (Number(result.rows[0]?.n ?? 0) > limit.max) throw tooManyOpenRuns(limit);
}

/** What the store writes: fenced by the owner token, in a transaction where more than one statement. */
function writes(
  database: pg.Pool,
  tables: DurableTables,
  postgresTransaction: typeof PostgresTransactionFn,
): Writes {
  const { runs, journal, frames } = tables;
  return {
    async createRun(record: RunRecord, batch: CommitBatch = {}, options = {}) {
      await postgresTransaction(database, async (client) => {
        const inserted = await client.query(
          `INSERT INTO ${runs} (${runColumns})
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (thread_id) DO NOTHING`,
          runValues(record),
        );
        if (inserted.rowCount === 0) {
          throw threadExists(record.threadId);
        }
        await applyBatch(client, tables, record.threadId, batch, record.owner);
        // Last, so the prefix's lock is held only for the count and the commit (ADR 0125).
        await lockOpen(client, runs, options.openLimit);
        await checkOpen(client, runs, options.openLimit, record.threadId);
      });
    },
    async claimRun(threadId, owner, fromStatus: readonly RunStatus[], batch = {}, options = {}) {
      return postgresTransaction(database, async (client) => {
        // The row lock serializes racing claimants; the silence is measured by the database's clock.
        const result = await client.query<RunRow & { silent_ms: number }>(
          `SELECT *, (extract(epoch FROM clock_timestamp() - updated_at::timestamptz) * 1000)::float8 AS silent_ms
           FROM ${runs} WHERE thread_id = $1 FOR UPDATE`,
          [threadId],
        );
        const row = result.rows[0];
        if (row === undefined) throw unknownRun(threadId);
        if (!fromStatus.includes(row.status as RunStatus)) return undefined;
        if (options.ifOwner !== undefined && row.owner !== options.ifOwner) return undefined;
        const lease = options.staleAfterMs ?? 0;
        if (lease > 0 && row.silent_ms < lease) throw leaseHeld(threadId, row.silent_ms, lease);
        await applyBatch(client, tables, threadId, { ...batch, run: { ...batch.run, owner } }, row.owner);
        // A claim that opens an ended thread's next run takes a place; a resume or takeover keeps its own.
        if (!openStatuses.includes(row.status as RunStatus)) {
          await lockOpen(client, runs, options.openLimit);
          await checkOpen(client, runs, options.openLimit, threadId);
        }
        const after = await client.query<RunRow>(`SELECT * FROM ${runs} WHERE thread_id = $1`, [threadId]);
        const last = await client.query<{ seq: string }>(
          `SELECT COALESCE(MAX(seq), 0) AS seq FROM ${frames} WHERE thread_id = $1`,
          [threadId],
        );
        return { run: fromRow(after.rows[0] as RunRow), lastSeq: Number(last.rows[0]?.seq ?? 0) };
      });
    },
    async commit(threadId, owner, batch) {
      await applyBatch(database, tables, threadId, batch, owner);
    },
    async deleteThread(threadId) {
      return postgresTransaction(database, async (client) => {
        await client.query(`DELETE FROM ${journal} WHERE thread_id = $1`, [threadId]);
        await client.query(`DELETE FROM ${frames} WHERE thread_id = $1`, [threadId]);
        const deleted = await client.query(`DELETE FROM ${runs} WHERE thread_id = $1`, [threadId]);
        return (deleted.rowCount ?? 0) > 0;
      });
    },
    async pruneThreads(query) {
      return postgresTransaction(database, async (client) => {
        const stale = await client.query<{ thread_id: string }>(
          `DELETE FROM ${runs} WHERE thread_id IN (
             SELECT thread_id FROM ${runs} WHERE ${sql.startsWith("thread_id", 1)} AND updated_at < $2
             AND ${sql.anyOf("status", 3)} ORDER BY updated_at LIMIT $4 FOR UPDATE)
           RETURNING thread_id`,
          [query.prefix ?? "", query.updatedBefore, sql.list(query.statuses), query.limit ?? null],
        );
        const ids = stale.rows.map((row) => row.thread_id);
        if (ids.length > 0) {
          await client.query(`DELETE FROM ${journal} WHERE ${sql.anyOf("thread_id", 1)}`, [sql.list(ids)]);
          await client.query(`DELETE FROM ${frames} WHERE ${sql.anyOf("thread_id", 1)}`, [sql.list(ids)]);
        }
        return ids;
      });
    },
  };
}
