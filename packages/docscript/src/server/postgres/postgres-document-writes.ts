/** The PostgreSQL store's writes: a new document, appends with their change log and rows, compaction. */
import { postgresTransaction } from "@tackle/storage/postgres";
import type pg from "pg";
import { changeValues } from "../change-log.ts";
import { type DocumentStore, StoreConflictError } from "../document-store.ts";
import { APPENDS_CHANNEL } from "./postgres-document-locks.ts";
import { indexPlansIn, recordPlans } from "./postgres-plan-index.ts";
import { clearRows, indexNumbers, writeRows } from "./postgres-row-writes.ts";

export type PostgresDocumentWrites = Pick<
  DocumentStore,
  "createDocument" | "append" | "replaceRows" | "advanceRows" | "indexNumbers" | "compact"
>;

const bytesOrNull = (bytes: Uint8Array | undefined) => (bytes === undefined ? null : Buffer.from(bytes));

export function postgresDocumentWrites(pool: pg.Pool): PostgresDocumentWrites {
  return {
    async createDocument({ documentId, tokenHash, snapshot, snapshotVersion, rows, issues, plans }) {
      const created = await postgresTransaction(pool, async (client) => {
        const result = await client.query(
          "INSERT INTO docscript_documents (document_id, token_hash, snapshot, snapshot_seq, snapshot_version) VALUES ($1, $2, $3, 0, $4) ON CONFLICT DO NOTHING",
          [documentId, tokenHash, Buffer.from(snapshot), bytesOrNull(snapshotVersion)],
        );
        if (result.rowCount !== 1) return false;
        if (rows !== undefined)
          await client.query(
            "INSERT INTO docscript_projection (document_id, rows_seq, issues, numbers_indexed) VALUES ($1, 0, $2, true)",
            [documentId, JSON.stringify(issues ?? [])],
          );
        if (rows !== undefined) await writeRows(client, documentId, rows, 0);
        if (plans !== undefined) await indexPlansIn(client, documentId, plans);
        return true;
      });
      if (created) await analyzeAfterBulk(pool, rows?.length ?? 0);
      return created;
    },
    async append({ documentId, seq, bytes, status, actor, rows, change, issues, plans }) {
      const insert = `WITH appended AS (
             INSERT INTO docscript_updates (document_id, seq, bytes, status, actor) VALUES ($1, $2, $3, $4, $5)
             RETURNING document_id
           )
           SELECT pg_notify('${APPENDS_CHANNEL}', document_id) FROM appended`;
      const values = [documentId, seq, Buffer.from(bytes), status, actor ?? null];
      try {
        // The notification goes out when the row commits: every listening server learns of it at once.
        if (rows === undefined && change === undefined && plans === undefined)
          await pool.query(insert, values);
        else
          await postgresTransaction(pool, async (client) => {
            await client.query(insert, values);
            // The plans it applied land with it: the plan index never lags the log.
            if (plans !== undefined) await recordPlans(client, documentId, plans);
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
      if (replaced) await analyzeAfterBulk(pool, rows.length);
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
    async indexNumbers(documentId, numbersOf) {
      await indexNumbers(pool, documentId, numbersOf);
    },
    async compact(documentId, snapshot, throughSeq, snapshotVersion) {
      const connection = await pool.connect();
      try {
        await connection.query("BEGIN");
        await connection.query(
          "UPDATE docscript_documents SET snapshot = $1, snapshot_seq = $2, snapshot_version = $4 WHERE document_id = $3 AND snapshot_seq < $2",
          [Buffer.from(snapshot), throughSeq, documentId, bytesOrNull(snapshotVersion)],
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
  };
}

/**
 * After a large document's rows landed at once: the planner's statistics, now, not when autovacuum
 * gets to them. Without them a page over a freshly stored 60k-entity document joined its members and
 * rows without their indexes (minutes), and each lookup of a push scanned (50–130 ms).
 */
async function analyzeAfterBulk(pool: pg.Pool, rowCount: number): Promise<void> {
  if (rowCount >= 10_000)
    await pool.query(
      "ANALYZE docscript_members, docscript_rows, docscript_numbers, docscript_containers, docscript_counts",
    );
}
