/** The scale-out document store: PostgreSQL through `pg`, the same update log and snapshots as SQLite. */
import { migratePostgres, openPostgres } from "@tackle/storage/postgres";
import pg from "pg";
import { type DocumentStore, type LoggedUpdate, StoreConflictError } from "../document-store.ts";
import { postgresMigrations } from "../migrations.ts";

/** The channel an append notifies, with the document id as payload. */
const APPENDS_CHANNEL = "docscript_appends";

export interface PostgresDocumentStoreOptions {
  /** A connection string, or a pool the caller owns (then `close()` leaves it open). */
  readonly connectionString?: string;
  readonly pool?: pg.Pool;
  /** Pool size when the store opens the pool (default 4). */
  readonly maxConnections?: number;
  /**
   * Documents one server can push to at the same moment: each push holds a connection of a separate
   * pool for its document's advisory lock (default 8; more wait for a lock connection).
   */
  readonly maxDocumentLocks?: number;
  /** How long a push waits for another server's push to the same document (default 30 000 ms). */
  readonly lockTimeoutMs?: number;
  /** Told when an idle pooled connection fails (the server restarted or ended it); default: a warning. */
  readonly onError?: (error: Error) => void;
}

export async function createPostgresDocumentStore(
  options: PostgresDocumentStoreOptions,
): Promise<DocumentStore> {
  // One pool policy: idle-connection losses go to onError (default: a process warning), never a crash.
  const handle = openPostgres({
    pool: options.pool,
    connectionString: options.connectionString,
    max: options.maxConnections ?? 4,
    label: "docscript",
    ...(options.onError === undefined ? {} : { onError: options.onError }),
  });
  const pool = handle.pool;
  try {
    // Two servers starting at once take turns under the migration lock; a newer schema is refused.
    await migratePostgres(pool, { store: "docscript", migrations: postgresMigrations });
  } catch (error) {
    await handle.close();
    throw error;
  }
  // Document locks on their own connections, so a push waiting for another server never starves the
  // queries of the pool above; the session lock dies with its connection if this process does.
  const locks =
    options.connectionString === undefined
      ? { pool, close: async () => {} }
      : openPostgres({
          connectionString: options.connectionString,
          max: options.maxDocumentLocks ?? 8,
          connectionTimeoutMs: options.lockTimeoutMs ?? 30_000,
          label: "docscript locks",
          ...(options.onError === undefined ? {} : { onError: options.onError }),
        });
  const lockTimeoutMs = options.lockTimeoutMs ?? 30_000;
  const stops = new Set<() => Promise<void>>();
  const toUpdates = (rows: { seq: string; bytes: Buffer }[]): LoggedUpdate[] =>
    rows.map((row) => ({ seq: Number(row.seq), bytes: new Uint8Array(row.bytes) }));

  return {
    async createDocument({ documentId, tokenHash, snapshot }) {
      const result = await pool.query(
        "INSERT INTO docscript_documents (document_id, token_hash, snapshot, snapshot_seq) VALUES ($1, $2, $3, 0) ON CONFLICT DO NOTHING",
        [documentId, tokenHash, Buffer.from(snapshot)],
      );
      return result.rowCount === 1;
    },
    async tokenHash(documentId) {
      const result = await pool.query<{ token_hash: string }>(
        "SELECT token_hash FROM docscript_documents WHERE document_id = $1",
        [documentId],
      );
      return result.rows[0]?.token_hash;
    },
    async load(documentId) {
      const connection = await pool.connect();
      try {
        // One snapshot-isolated read, so a concurrent compaction cannot drop updates between the two queries.
        await connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
        const document = await connection.query<{
          token_hash: string;
          snapshot: Buffer;
          snapshot_seq: string;
        }>("SELECT token_hash, snapshot, snapshot_seq FROM docscript_documents WHERE document_id = $1", [
          documentId,
        ]);
        const row = document.rows[0];
        if (row === undefined) {
          await connection.query("COMMIT");
          return undefined;
        }
        const updates = await connection.query<{ seq: string; bytes: Buffer }>(
          "SELECT seq, bytes FROM docscript_updates WHERE document_id = $1 AND seq > $2 ORDER BY seq",
          [documentId, row.snapshot_seq],
        );
        await connection.query("COMMIT");
        return {
          tokenHash: row.token_hash,
          snapshot: new Uint8Array(row.snapshot),
          snapshotSeq: Number(row.snapshot_seq),
          updates: toUpdates(updates.rows),
        };
      } catch (error) {
        await connection.query("ROLLBACK").catch(() => undefined);
        throw error;
      } finally {
        connection.release();
      }
    },
    async snapshotSeq(documentId) {
      const result = await pool.query<{ snapshot_seq: string }>(
        "SELECT snapshot_seq FROM docscript_documents WHERE document_id = $1",
        [documentId],
      );
      const row = result.rows[0];
      return row === undefined ? undefined : Number(row.snapshot_seq);
    },
    async updatesAfter(documentId, seq) {
      const result = await pool.query<{ seq: string; bytes: Buffer }>(
        "SELECT seq, bytes FROM docscript_updates WHERE document_id = $1 AND seq > $2 ORDER BY seq",
        [documentId, seq],
      );
      return toUpdates(result.rows);
    },
    async append({ documentId, seq, bytes, status, actor }) {
      try {
        // The notification goes out when the row commits: every listening server learns of it at once.
        await pool.query(
          `WITH appended AS (
             INSERT INTO docscript_updates (document_id, seq, bytes, status, actor) VALUES ($1, $2, $3, $4, $5)
             RETURNING document_id
           )
           SELECT pg_notify('${APPENDS_CHANNEL}', document_id) FROM appended`,
          [documentId, seq, Buffer.from(bytes), status, actor ?? null],
        );
      } catch (error) {
        if ((error as { code?: string }).code === "23505")
          throw new StoreConflictError(documentId, seq, error);
        throw error;
      }
    },
    async compact(documentId, snapshot, throughSeq) {
      const connection = await pool.connect();
      try {
        await connection.query("BEGIN");
        await connection.query(
          "UPDATE docscript_documents SET snapshot = $1, snapshot_seq = $2 WHERE document_id = $3 AND snapshot_seq < $2",
          [Buffer.from(snapshot), throughSeq, documentId],
        );
        await connection.query("DELETE FROM docscript_updates WHERE document_id = $1 AND seq <= $2", [
          documentId,
          throughSeq,
        ]);
        await connection.query("COMMIT");
      } catch (error) {
        await connection.query("ROLLBACK").catch(() => undefined);
        throw error;
      } finally {
        connection.release();
      }
    },
    async lockDocument(documentId) {
      const client = await locks.pool.connect();
      try {
        await client.query("SELECT set_config('lock_timeout', $1, false)", [`${lockTimeoutMs}ms`]);
        await client.query("SELECT pg_advisory_lock(hashtext('docscript:' || $1))", [documentId]);
      } catch (error) {
        client.release(error as Error);
        throw error;
      }
      let released = false;
      return async () => {
        if (released) return;
        released = true;
        try {
          await client.query("SELECT pg_advisory_unlock(hashtext('docscript:' || $1))", [documentId]);
          client.release();
        } catch (error) {
          // A connection that cannot unlock is closed, which releases the lock.
          client.release(error as Error);
        }
      };
    },
    async watchAppends(listener) {
      let stopped = false;
      let current: pg.Client | undefined;
      let endCurrent: (error?: Error) => void = () => {};
      let retry: NodeJS.Timeout | undefined;
      const onNotification = (message: pg.Notification) => {
        if (message.channel === APPENDS_CHANNEL && message.payload !== undefined) listener(message.payload);
      };
      // A dedicated connection (a pooled one from a caller's pool otherwise); when it is lost, listen
      // again after a short wait — reads catch up from the database anyway, so a missed notice only
      // delays a waiting reader to its deadline.
      const listen = async (): Promise<void> => {
        const pooled = options.connectionString === undefined;
        const next = pooled
          ? await pool.connect()
          : new pg.Client({ connectionString: options.connectionString });
        const end = (error?: Error) =>
          pooled ? (next as pg.PoolClient).release(error) : void next.end().catch(() => undefined);
        if (!pooled) await next.connect();
        next.on("notification", onNotification);
        next.on("error", (error: Error) => {
          options.onError?.(error);
          if (current !== next) return;
          current = undefined;
          end(error);
          scheduleRetry(250);
        });
        try {
          await next.query(`LISTEN ${APPENDS_CHANNEL}`);
        } catch (error) {
          end(error as Error);
          throw error;
        }
        if (stopped) end();
        else {
          current = next;
          endCurrent = end;
        }
      };
      const scheduleRetry = (afterMs: number) => {
        if (!stopped) retry = setTimeout(() => void listen().catch(() => scheduleRetry(1000)), afterMs);
      };
      await listen();
      const stop = async () => {
        stopped = true;
        clearTimeout(retry);
        const listening = current;
        current = undefined;
        if (listening === undefined) return;
        listening.off("notification", onNotification);
        endCurrent();
      };
      stops.add(stop);
      return async () => {
        stops.delete(stop);
        await stop();
      };
    },
    async close() {
      for (const stop of [...stops]) await stop();
      stops.clear();
      await handle.close();
      await locks.close();
    },
  };
}
