/** The scale-out document store: PostgreSQL through `pg`, the same update log and snapshots as SQLite. */
import pg from "pg";
import { type DocumentStore, type LoggedUpdate, StoreConflictError } from "../document-store.ts";

export interface PostgresDocumentStoreOptions {
  /** A connection string, or a pool the caller owns (then `close()` leaves it open). */
  readonly connectionString?: string;
  readonly pool?: pg.Pool;
  /** Told when an idle pooled connection fails (the server restarted or ended it); default: a warning. */
  readonly onError?: (error: Error) => void;
}

const schemaSql = `
  CREATE TABLE IF NOT EXISTS docscript_documents (
    document_id TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL,
    snapshot BYTEA NOT NULL,
    snapshot_seq BIGINT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
  );
  CREATE TABLE IF NOT EXISTS docscript_updates (
    document_id TEXT NOT NULL REFERENCES docscript_documents(document_id),
    seq BIGINT NOT NULL,
    bytes BYTEA NOT NULL,
    status TEXT NOT NULL,
    actor TEXT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, seq)
  );
`;

export async function createPostgresDocumentStore(
  options: PostgresDocumentStoreOptions,
): Promise<DocumentStore> {
  const ownsPool = options.pool === undefined;
  const pool = options.pool ?? new pg.Pool({ connectionString: options.connectionString, max: 4 });
  // Without a listener, an idle connection the server ends would crash the process; the pool replaces it.
  if (ownsPool) {
    pool.on("error", (error) => {
      if (options.onError) options.onError(error);
      else console.warn(`docscript: idle PostgreSQL connection lost: ${error.message}`);
    });
  }
  // Two servers starting at once may both create the tables; the advisory lock makes it one at a time.
  const client = await pool.connect();
  try {
    await client.query("SELECT pg_advisory_lock(hashtext('docscript_schema'))");
    await client.query(schemaSql);
  } finally {
    await client.query("SELECT pg_advisory_unlock(hashtext('docscript_schema'))").catch(() => undefined);
    client.release();
  }
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
    async updatesAfter(documentId, seq) {
      const result = await pool.query<{ seq: string; bytes: Buffer }>(
        "SELECT seq, bytes FROM docscript_updates WHERE document_id = $1 AND seq > $2 ORDER BY seq",
        [documentId, seq],
      );
      return toUpdates(result.rows);
    },
    async append({ documentId, seq, bytes, status, actor }) {
      try {
        await pool.query(
          "INSERT INTO docscript_updates (document_id, seq, bytes, status, actor) VALUES ($1, $2, $3, $4, $5)",
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
    async close() {
      if (ownsPool) await pool.end();
    },
  };
}
