/** The embedded document store: one SQLite file (node:sqlite), an update log and compacted snapshots. */
import type { DatabaseSync } from "node:sqlite";
import { openMigratedSqlite, sqliteTransaction } from "@tackle/storage";
import { changeValues } from "./change-log.ts";
import { type DocumentStore, StoreConflictError } from "./document-store.ts";
import { sqliteMigrations } from "./migrations.ts";
import { sqliteContainerPlaces } from "./sqlite-container-index.ts";
import { created, sqliteDocumentReads } from "./sqlite-document-reads.ts";
import { sqlitePlanCalls, sqlitePlanIndex } from "./sqlite-plan-index.ts";
import { sqliteRowWrites } from "./sqlite-row-writes.ts";
import { defaultClaimLeaseMs, sqliteStagedCreate } from "./sqlite-staged-create.ts";

export interface SqliteDocumentStoreOptions {
  /** A file path, or `:memory:`. */
  readonly path: string;
  /**
   * How long, in ms, a create's claim on its id holds without being renewed (ADR 0562; default
   * 15,000). A large create renews it every slice it writes (about every 20 ms); once it lapses (the
   * create's process killed, or stalled that long) another open of the file, or another create of the
   * id, takes the claim back, and the create it was, if still running, fails with nothing stored.
   */
  readonly claimLeaseMs?: number;
}

export function createSqliteDocumentStore(options: SqliteDocumentStoreOptions): DocumentStore {
  const leaseMs = options.claimLeaseMs ?? defaultClaimLeaseMs;
  if (!Number.isInteger(leaseMs) || leaseMs <= 0)
    throw new RangeError(`claimLeaseMs must be a positive whole number of ms, not ${options.claimLeaseMs}`);
  // WAL, a busy timeout, a full sync; refuses (StorageError "schema_too_new") a newer file.
  const database = openMigratedSqlite({
    path: options.path,
    synchronous: "full",
    store: "docscript",
    migrations: sqliteMigrations,
  });
  const insertUpdate = database.prepare(
    "INSERT INTO docscript_updates (document_id, seq, bytes, status, actor, created_at) VALUES (?, ?, ?, ?, ?, ?)",
  );
  const insertChange = database.prepare(
    `INSERT INTO docscript_changes (document_id, seq, status, actor, credential, peers, plan_ids,
       entities_created, entities_changed, entities_deleted, relations_created, relations_changed,
       relations_deleted, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const selectLastSeq = database.prepare(
    `SELECT max(coalesce((SELECT max(seq) FROM docscript_updates WHERE document_id = ?1), 0), snapshot_seq) AS seq
     FROM docscript_documents WHERE document_id = ?1 AND ${created}`,
  );
  const advanceRowsSeq = database.prepare(
    "UPDATE docscript_projection SET rows_seq = ?1, issues = ?4 WHERE document_id = ?2 AND rows_seq = ?3",
  );
  // Rows written whole (a new document, or its rows replaced): every entity's numbers are indexed.
  const setProjection = database.prepare(
    `INSERT INTO docscript_projection (document_id, rows_seq, issues, numbers_indexed) VALUES (?1, ?2, ?3, 1)
     ON CONFLICT (document_id) DO UPDATE SET rows_seq = excluded.rows_seq, issues = excluded.issues,
       numbers_indexed = 1`,
  );
  const { writeRows, clearRows, indexNumbers } = sqliteRowWrites(database);
  const planIndex = sqlitePlanIndex(database);
  // Creates are written in slices under a claimed id (ADR 0560), held under a lease (ADR 0562): the
  // claims of killed creates, past their lease, are taken back; those of creates running elsewhere stay.
  const create = sqliteStagedCreate(database, { writeRows, clearRows }, planIndex, leaseMs);
  create.clearUnfinished();

  return {
    ...sqliteDocumentReads(database),
    ...sqlitePlanCalls(database, planIndex),
    ...sqliteCompaction(database),
    ...sqliteContainerPlaces(database),
    createDocument: create.createDocument,
    async append({ documentId, seq, bytes, status, actor, rows, change, issues, plans }) {
      const at = new Date().toISOString();
      try {
        sqliteTransaction(database, () => {
          insertUpdate.run(documentId, seq, bytes, status, actor ?? null, at);
          // The plans it applied land with it: the plan index never lags the log.
          if (plans !== undefined) planIndex.recordPlans(documentId, plans);
          // The change log entry lands with its update, or neither does.
          if (change !== undefined)
            insertChange.run(documentId, seq, status, ...changeValues(actor, change), at);
          // Rows only onto a projection that holds through the previous update; else it stays behind.
          const issuesJson = issues === undefined ? null : JSON.stringify(issues);
          if (
            rows !== undefined &&
            Number(advanceRowsSeq.run(seq, documentId, seq - 1, issuesJson).changes) === 1
          )
            writeRows(documentId, rows, seq);
        });
      } catch (error) {
        if (/UNIQUE|PRIMARY KEY/i.test(String((error as Error).message)))
          throw new StoreConflictError(documentId, seq, error);
        throw error;
      }
    },
    async replaceRows(documentId, throughSeq, rows, issues) {
      return sqliteTransaction(database, () => {
        const last = selectLastSeq.get(documentId) as { seq: number | null } | undefined;
        if (last === undefined || Number(last.seq) > throughSeq) return false;
        clearRows(documentId);
        writeRows(documentId, rows, throughSeq);
        setProjection.run(documentId, throughSeq, JSON.stringify(issues));
        return true;
      });
    },
    async advanceRows(documentId, seq, rows, issues) {
      return sqliteTransaction(database, () => {
        if (Number(advanceRowsSeq.run(seq, documentId, seq - 1, JSON.stringify(issues)).changes) !== 1)
          return false;
        writeRows(documentId, rows, seq);
        return true;
      });
    },
    async indexNumbers(documentId, numbersOf) {
      await indexNumbers(documentId, numbersOf);
    },
    async close() {
      if (database.isOpen) database.close();
    },
  };
}

/** Compaction: the snapshot replaced by a newer one and the updates it holds dropped, in one transaction. */
function sqliteCompaction(database: DatabaseSync): Pick<DocumentStore, "compact"> {
  const updateSnapshot = database.prepare(
    "UPDATE docscript_documents SET snapshot_seq = ?, snapshot_version = ? WHERE document_id = ? AND snapshot_seq < ?",
  );
  const replaceSnapshot = database.prepare(
    "UPDATE docscript_snapshots SET snapshot = ? WHERE document_id = ?",
  );
  const deleteUpdates = database.prepare("DELETE FROM docscript_updates WHERE document_id = ? AND seq <= ?");
  return {
    async compact(documentId, snapshot, throughSeq, snapshotVersion) {
      sqliteTransaction(database, () => {
        // A snapshot older than the one stored is not written (another server compacted further).
        if (
          Number(updateSnapshot.run(throughSeq, snapshotVersion ?? null, documentId, throughSeq).changes) ===
          1
        )
          replaceSnapshot.run(snapshot, documentId);
        deleteUpdates.run(documentId, throughSeq);
      });
    },
  };
}
