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
  countedPrefix,
  leaseHeld,
  type OpenLimit,
  type OpenRunsCount,
  openStatuses,
  tooManyOpenRuns,
} from "../../store/durable-store.ts";
import { fromRow, type RunRow, runColumns, runValues, threadExists, unknownRun } from "../run-row.ts";
import { typedFailures } from "../typed-failures.ts";
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
  return typedFailures(
    {
      ...reads(handle.pool, tables),
      ...writes(handle.pool, tables, postgresTransaction),
      async recountOpenRuns(): Promise<OpenRunsCount[]> {
        // One statement: the counters and the runs read at one moment.
        const result = await handle.pool.query<{ prefix: string; counter: string; recounted: string }>(
          `SELECT prefix, sum(counter) AS counter, sum(recounted) AS recounted FROM (
           SELECT prefix, n AS counter, 0 AS recounted FROM ${tables.openRuns}
           UNION ALL SELECT open_prefix, 0, count(*) FROM ${tables.runs}
           WHERE open_prefix IS NOT NULL AND status IN ('running', 'paused') GROUP BY open_prefix) counts
         GROUP BY prefix ORDER BY prefix COLLATE "C"`,
        );
        return result.rows.map((row) => ({
          prefix: row.prefix,
          counter: Number(row.counter),
          recounted: Number(row.recounted),
        }));
      },
      async close() {
        await handle.close();
      },
    },
    postgresUnavailable,
  );
}

/** What a caller is told when PostgreSQL failed under its call (ADR 0129). */
const postgresUnavailable =
  "PostgreSQL failed under the call (a connection lost or refused, a session ended, a deadlock); what it sent may have landed: read the run, or send the call again";

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

const isOpen = (status: string | undefined) => openStatuses.includes(status as RunStatus);

/**
 * Counts one more open run under `prefix` and throws `too_many_open_runs` when that passes the bound
 * (the throw rolls the transaction back, the counter with it). The counter's row lock, held to the
 * commit, makes writes that open a run under one prefix take turns, each seeing the others' counts
 * (ADR 0127). Taken last, after the write's own rows (ADR 0125): a holder waits on nothing, so a turn
 * lasts this statement and the commit.
 */
async function countOpen(
  client: pg.PoolClient,
  openRuns: string,
  limit: OpenLimit,
  prefix: string,
): Promise<void> {
  const result = await client.query<{ n: number }>(
    `INSERT INTO ${openRuns} (prefix, n) VALUES ($1, 1)
     ON CONFLICT (prefix) DO UPDATE SET n = ${openRuns}.n + 1 RETURNING n`,
    [prefix],
  );
  if (Number(result.rows[0]?.n ?? 0) > limit.max) throw tooManyOpenRuns(limit);
}

/** Gives back `count` places under each prefix, in prefix order (so two such writes lock alike). */
async function uncountOpen(
  client: pg.PoolClient,
  openRuns: string,
  freed: Map<string, number>,
): Promise<void> {
  for (const prefix of [...freed.keys()].sort()) {
    await client.query(`UPDATE ${openRuns} SET n = n - $2 WHERE prefix = $1`, [prefix, freed.get(prefix)]);
  }
}

/** What the store writes: fenced by the owner token, in a transaction where more than one statement. */
function writes(
  database: pg.Pool,
  tables: DurableTables,
  postgresTransaction: typeof PostgresTransactionFn,
): Writes {
  const { runs, journal, frames, openRuns } = tables;
  return {
    async createRun(record: RunRecord, batch: CommitBatch = {}, options = {}) {
      const limit = options.openLimit;
      const prefix = isOpen(batch.run?.status ?? record.status)
        ? countedPrefix(limit, record.threadId)
        : null;
      await postgresTransaction(database, async (client) => {
        const inserted = await client.query(
          `INSERT INTO ${runs} (${runColumns}, open_prefix)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (thread_id) DO NOTHING`,
          [...runValues(record), prefix],
        );
        if (inserted.rowCount === 0) {
          throw threadExists(record.threadId);
        }
        await applyBatch(client, tables, record.threadId, batch, record.owner);
        // Last, so the prefix's counter is locked only for its update and the commit (ADR 0125).
        if (prefix !== null && limit !== undefined) await countOpen(client, openRuns, limit, prefix);
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
        // A claim that opens an ended thread's next run takes a place, and one that ends a run gives its
        // place back (the row is locked: its mark is the one read); a resume or takeover keeps its own.
        const status = batch.run?.status ?? row.status;
        const reopens = !isOpen(row.status) && isOpen(status);
        const prefix = reopens ? countedPrefix(options.openLimit, threadId) : null;
        const releases = isOpen(row.status) && !isOpen(status) && row.open_prefix != null;
        const mark = prefix !== null ? { set: prefix } : releases ? { set: null } : {};
        await applyBatch(
          client,
          tables,
          threadId,
          { ...batch, run: { ...batch.run, owner } },
          row.owner,
          mark,
        );
        if (releases) await uncountOpen(client, openRuns, new Map([[row.open_prefix as string, 1]]));
        const after = await client.query<RunRow>(`SELECT * FROM ${runs} WHERE thread_id = $1`, [threadId]);
        const last = await client.query<{ seq: string }>(
          `SELECT COALESCE(MAX(seq), 0) AS seq FROM ${frames} WHERE thread_id = $1`,
          [threadId],
        );
        // Last, so the prefix's counter is locked only for its update and the commit (ADR 0125).
        if (prefix !== null && options.openLimit !== undefined)
          await countOpen(client, openRuns, options.openLimit, prefix);
        return { run: fromRow(after.rows[0] as RunRow), lastSeq: Number(last.rows[0]?.seq ?? 0) };
      });
    },
    async commit(threadId, owner, batch) {
      // A commit that ends the run gives its place back in the same statement (ADR 0127).
      const status = batch.run?.status;
      await applyBatch(database, tables, threadId, batch, owner, {
        release: status !== undefined && !isOpen(status),
      });
    },
    async deleteThread(threadId) {
      return postgresTransaction(database, async (client) => {
        await client.query(`DELETE FROM ${journal} WHERE thread_id = $1`, [threadId]);
        await client.query(`DELETE FROM ${frames} WHERE thread_id = $1`, [threadId]);
        const deleted = await client.query<{ open_prefix: string | null }>(
          `DELETE FROM ${runs} WHERE thread_id = $1 RETURNING open_prefix`,
          [threadId],
        );
        const counted = deleted.rows[0]?.open_prefix;
        if (counted != null) await uncountOpen(client, openRuns, new Map([[counted, 1]]));
        return (deleted.rowCount ?? 0) > 0;
      });
    },
    async pruneThreads(query) {
      return postgresTransaction(database, async (client) => {
        const stale = await client.query<{ thread_id: string; open_prefix: string | null }>(
          `DELETE FROM ${runs} WHERE thread_id IN (
             SELECT thread_id FROM ${runs} WHERE ${sql.startsWith("thread_id", 1)} AND updated_at < $2
             AND ${sql.anyOf("status", 3)} ORDER BY updated_at LIMIT $4 FOR UPDATE)
           RETURNING thread_id, open_prefix`,
          [query.prefix ?? "", query.updatedBefore, sql.list(query.statuses), query.limit ?? null],
        );
        const ids = stale.rows.map((row) => row.thread_id);
        if (ids.length > 0) {
          await client.query(`DELETE FROM ${journal} WHERE ${sql.anyOf("thread_id", 1)}`, [sql.list(ids)]);
          await client.query(`DELETE FROM ${frames} WHERE ${sql.anyOf("thread_id", 1)}`, [sql.list(ids)]);
        }
        // The pruned runs still open give their places back.
        const freed = new Map<string, number>();
        for (const row of stale.rows) {
          if (row.open_prefix !== null) freed.set(row.open_prefix, (freed.get(row.open_prefix) ?? 0) + 1);
        }
        await uncountOpen(client, openRuns, freed);
        return ids;
      });
    },
  };
}
