/** The scale-out document store: PostgreSQL through `pg`, the same update log and snapshots as SQLite. */
import { migratePostgres, openPostgres, postgresTransaction } from "@tackle/storage/postgres";
import type pg from "pg";
import { type ChangeRow, changeOfRow, changeValues, pageOf } from "../change-log.ts";
import { type DocumentStore, type LoggedUpdate, StoreConflictError } from "../document-store.ts";
import { postgresMigrations } from "../migrations.ts";
import { APPENDS_CHANNEL, documentLocks } from "./postgres-document-locks.ts";
import { postgresRowReads } from "./postgres-row-reads.ts";
import { clearRows, indexNumbers, writeRows } from "./postgres-row-writes.ts";

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
  const coordination = documentLocks({
    pool,
    connectionString: options.connectionString,
    locks,
    lockTimeoutMs: options.lockTimeoutMs ?? 30_000,
    onError: options.onError,
  });
  const reads = postgresRowReads(pool);
  /**
   * After a large document's rows landed at once: the planner's statistics, now, not when autovacuum
   * gets to them. Without them a page over a freshly stored 60k-entity document joined its members and
   * rows without their indexes (minutes), and each lookup of a push scanned (50–130 ms).
   */
  const analyzeAfterBulk = async (rowCount: number): Promise<void> => {
    if (rowCount >= 10_000)
      await pool.query("ANALYZE docscript_members, docscript_rows, docscript_numbers, docscript_counts");
  };
  const toUpdates = (rows: { seq: string; bytes: Buffer }[]): LoggedUpdate[] =>
    rows.map((row) => ({ seq: Number(row.seq), bytes: new Uint8Array(row.bytes) }));

  return {
    async createDocument({ documentId, tokenHash, snapshot, rows, issues }) {
      const created = await postgresTransaction(pool, async (client) => {
        const result = await client.query(
          "INSERT INTO docscript_documents (document_id, token_hash, snapshot, snapshot_seq) VALUES ($1, $2, $3, 0) ON CONFLICT DO NOTHING",
          [documentId, tokenHash, Buffer.from(snapshot)],
        );
        if (result.rowCount !== 1) return false;
        if (rows !== undefined)
          await client.query(
            "INSERT INTO docscript_projection (document_id, rows_seq, issues, numbers_indexed) VALUES ($1, 0, $2, true)",
            [documentId, JSON.stringify(issues ?? [])],
          );
        if (rows !== undefined) await writeRows(client, documentId, rows, 0);
        return true;
      });
      if (created) await analyzeAfterBulk(rows?.length ?? 0);
      return created;
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
    async append({ documentId, seq, bytes, status, actor, rows, change, issues }) {
      const insert = `WITH appended AS (
             INSERT INTO docscript_updates (document_id, seq, bytes, status, actor) VALUES ($1, $2, $3, $4, $5)
             RETURNING document_id
           )
           SELECT pg_notify('${APPENDS_CHANNEL}', document_id) FROM appended`;
      const values = [documentId, seq, Buffer.from(bytes), status, actor ?? null];
      try {
        // The notification goes out when the row commits: every listening server learns of it at once.
        if (rows === undefined && change === undefined) await pool.query(insert, values);
        else
          await postgresTransaction(pool, async (client) => {
            await client.query(insert, values);
            // The change log entry lands with its update, or neither does.
            if (change !== undefined)
              await client.query(
                `INSERT INTO docscript_changes (document_id, seq, status, actor, credential, peers, plan_ids,
                   entities_created, entities_changed, entities_deleted, relations_created, relations_changed,
                   relations_deleted) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
                [documentId, seq, status, ...changeValues(actor, change)],
              );
            if (rows === undefined) return;
            // Rows only onto a projection that holds through the previous update; else it stays behind.
            const advanced = await client.query(
              "UPDATE docscript_projection SET rows_seq = $1, issues = $4 WHERE document_id = $2 AND rows_seq = $3",
              [seq, documentId, seq - 1, issues === undefined ? null : JSON.stringify(issues)],
            );
            if (advanced.rowCount === 1) await writeRows(client, documentId, rows, seq);
          });
      } catch (error) {
        if ((error as { code?: string }).code === "23505")
          throw new StoreConflictError(documentId, seq, error);
        throw error;
      }
    },
    async changes(documentId, { before, limit }) {
      const result = await pool.query<ChangeRow>(
        "SELECT * FROM docscript_changes WHERE document_id = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3",
        [documentId, before ?? Number.MAX_SAFE_INTEGER, limit + 1],
      );
      return pageOf(result.rows.map(changeOfRow), limit);
    },
    async rowsSeq(documentId) {
      const result = await pool.query<{ rows_seq: string | null }>(
        "SELECT rows_seq FROM docscript_projection WHERE document_id = $1",
        [documentId],
      );
      const value = result.rows[0]?.rows_seq;
      return value === null || value === undefined ? undefined : Number(value);
    },
    async replaceRows(documentId, throughSeq, rows, issues) {
      const replaced = await postgresTransaction(pool, async (client) => {
        // The document's row locked: an append committing meanwhile waits, or is seen below.
        const last = await client.query<{ seq: string }>(
          `SELECT greatest(coalesce((SELECT max(seq) FROM docscript_updates WHERE document_id = $1), 0), snapshot_seq) AS seq
           FROM docscript_documents WHERE document_id = $1 FOR UPDATE`,
          [documentId],
        );
        const row = last.rows[0];
        if (row === undefined || Number(row.seq) > throughSeq) return false;
        await clearRows(client, documentId);
        await writeRows(client, documentId, rows, throughSeq);
        await client.query(
          `INSERT INTO docscript_projection (document_id, rows_seq, issues, numbers_indexed) VALUES ($2, $1, $3, true)
           ON CONFLICT (document_id) DO UPDATE SET rows_seq = excluded.rows_seq, issues = excluded.issues,
             numbers_indexed = true`,
          [throughSeq, documentId, JSON.stringify(issues)],
        );
        return true;
      });
      if (replaced) await analyzeAfterBulk(rows.length);
      return replaced;
    },
    async advanceRows(documentId, seq, rows, issues) {
      return postgresTransaction(pool, async (client) => {
        const advanced = await client.query(
          "UPDATE docscript_projection SET rows_seq = $1, issues = $4 WHERE document_id = $2 AND rows_seq = $3",
          [seq, documentId, seq - 1, JSON.stringify(issues)],
        );
        if (advanced.rowCount !== 1) return false;
        await writeRows(client, documentId, rows, seq);
        return true;
      });
    },
    async documentIssues(documentId) {
      const result = await pool.query<{ issues: string | null }>(
        "SELECT issues FROM docscript_projection WHERE document_id = $1",
        [documentId],
      );
      const issues = result.rows[0]?.issues;
      return issues === null || issues === undefined ? undefined : JSON.parse(issues);
    },
    ...reads,
    async indexNumbers(documentId, numbersOf) {
      await indexNumbers(pool, documentId, numbersOf);
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
    lockDocument: coordination.lockDocument,
    watchAppends: coordination.watchAppends,
    async close() {
      await coordination.stopWatches();
      await handle.close();
      await locks.close();
    },
  };
}
