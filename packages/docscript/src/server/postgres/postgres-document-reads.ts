/** The PostgreSQL store's reads of a document's token, snapshot and log, change log and projection state. */
import type pg from "pg";
import { type ChangeRow, changeOfRow, pageOf } from "../change-log.ts";
import type { DocumentStore, LoggedUpdate, StoredHead } from "../document-store.ts";

/** Rows of the update log as the store hands them out. */
export const toUpdates = (rows: { seq: string; bytes: Buffer }[]): LoggedUpdate[] =>
  rows.map((row) => ({ seq: Number(row.seq), bytes: new Uint8Array(row.bytes) }));

export type PostgresDocumentReads = Pick<
  DocumentStore,
  | "tokenHash"
  | "load"
  | "loadHead"
  | "keepSnapshotVersion"
  | "snapshotSeq"
  | "updatesAfter"
  | "changes"
  | "rowsSeq"
  | "documentIssues"
>;

/** The document row and the log after its snapshot, in one snapshot-isolated read; the snapshot only when asked. */
async function readDocument(
  pool: pg.Pool,
  documentId: string,
  withSnapshot: boolean,
): Promise<(StoredHead & { snapshot?: Uint8Array }) | undefined> {
  const connection = await pool.connect();
  try {
    // Snapshot-isolated, so a concurrent compaction cannot drop updates between the two queries.
    await connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    const document = await connection.query<{
      token_hash: string;
      snapshot?: Buffer;
      snapshot_seq: string;
      snapshot_version: Buffer | null;
    }>(
      `SELECT token_hash, ${withSnapshot ? "snapshot, " : ""}snapshot_seq, snapshot_version
       FROM docscript_documents WHERE document_id = $1`,
      [documentId],
    );
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
      ...(row.snapshot === undefined ? {} : { snapshot: new Uint8Array(row.snapshot) }),
      snapshotSeq: Number(row.snapshot_seq),
      snapshotVersion: row.snapshot_version === null ? undefined : new Uint8Array(row.snapshot_version),
      updates: toUpdates(updates.rows),
    };
  } catch (error) {
    await connection.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    connection.release();
  }
}

export function postgresDocumentReads(pool: pg.Pool): PostgresDocumentReads {
  return {
    async tokenHash(documentId) {
      const result = await pool.query<{ token_hash: string }>(
        "SELECT token_hash FROM docscript_documents WHERE document_id = $1",
        [documentId],
      );
      return result.rows[0]?.token_hash;
    },
    async load(documentId) {
      const stored = await readDocument(pool, documentId, true);
      // Read with its snapshot: a row always has one.
      if (stored?.snapshot === undefined) return undefined;
      return { ...stored, snapshot: stored.snapshot };
    },
    async loadHead(documentId) {
      return readDocument(pool, documentId, false);
    },
    async keepSnapshotVersion(documentId, snapshotSeq, version) {
      await pool.query(
        "UPDATE docscript_documents SET snapshot_version = $1 WHERE document_id = $2 AND snapshot_seq = $3 AND snapshot_version IS NULL",
        [Buffer.from(version), documentId, snapshotSeq],
      );
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
    async documentIssues(documentId) {
      const result = await pool.query<{ issues: string | null }>(
        "SELECT issues FROM docscript_projection WHERE document_id = $1",
        [documentId],
      );
      const issues = result.rows[0]?.issues;
      return issues === null || issues === undefined ? undefined : JSON.parse(issues);
    },
  };
}
