/** The embedded document store: one SQLite file (node:sqlite), an update log and compacted snapshots. */
import { openMigratedSqlite, sqliteTransaction } from "@tackle/storage";
import { type ChangeRow, changeOfRow, changeValues, pageOf } from "./change-log.ts";
import {
  type DocumentStore,
  type LoggedUpdate,
  type ProjectedRow,
  type RowRoot,
  StoreConflictError,
} from "./document-store.ts";
import { sqliteMigrations } from "./migrations.ts";
import { sqliteMemberReads } from "./sqlite-member-reads.ts";
import { sqliteRowWrites } from "./sqlite-row-writes.ts";

export interface SqliteDocumentStoreOptions {
  /** A file path, or `:memory:`. */
  readonly path: string;
}

export function createSqliteDocumentStore(options: SqliteDocumentStoreOptions): DocumentStore {
  // WAL, a busy timeout, a full sync; refuses (StorageError "schema_too_new") a newer file.
  const database = openMigratedSqlite({
    path: options.path,
    synchronous: "full",
    store: "docscript",
    migrations: sqliteMigrations,
  });
  const insertDocument = database.prepare(
    "INSERT INTO docscript_documents (document_id, token_hash, snapshot, snapshot_seq, created_at) VALUES (?, ?, ?, 0, ?) ON CONFLICT DO NOTHING",
  );
  const selectDocument = database.prepare(
    "SELECT token_hash, snapshot, snapshot_seq FROM docscript_documents WHERE document_id = ?",
  );
  const selectToken = database.prepare("SELECT token_hash FROM docscript_documents WHERE document_id = ?");
  // Asked before every push: the seq alone, never the snapshot beside it (16 MB at 100k entities).
  const selectSnapshotSeq = database.prepare(
    "SELECT snapshot_seq FROM docscript_documents WHERE document_id = ?",
  );
  const selectUpdates = database.prepare(
    "SELECT seq, bytes FROM docscript_updates WHERE document_id = ? AND seq > ? ORDER BY seq",
  );
  const insertUpdate = database.prepare(
    "INSERT INTO docscript_updates (document_id, seq, bytes, status, actor, created_at) VALUES (?, ?, ?, ?, ?, ?)",
  );
  const insertChange = database.prepare(
    `INSERT INTO docscript_changes (document_id, seq, status, actor, credential, peers, plan_ids,
       entities_created, entities_changed, entities_deleted, relations_created, relations_changed,
       relations_deleted, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const selectChanges = database.prepare(
    "SELECT * FROM docscript_changes WHERE document_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
  );
  const updateSnapshot = database.prepare(
    "UPDATE docscript_documents SET snapshot = ?, snapshot_seq = ? WHERE document_id = ? AND snapshot_seq < ?",
  );
  const deleteUpdates = database.prepare("DELETE FROM docscript_updates WHERE document_id = ? AND seq <= ?");
  const selectRowsSeq = database.prepare("SELECT rows_seq FROM docscript_projection WHERE document_id = ?");
  const selectLastSeq = database.prepare(
    `SELECT max(coalesce((SELECT max(seq) FROM docscript_updates WHERE document_id = ?1), 0), snapshot_seq) AS seq
     FROM docscript_documents WHERE document_id = ?1`,
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
  // Optional filters are JSON arrays (NULL: no filter), so one prepared statement serves every page.
  const selectRows = database.prepare(
    `SELECT root, row_id, kind, payload, version FROM docscript_rows
     WHERE document_id = ?1 AND root = ?2 AND row_id > ?3
       AND (?4 IS NULL OR kind IN (SELECT value FROM json_each(?4)))
       AND (?5 IS NULL OR row_id IN (SELECT value FROM json_each(?5)))
       AND (?6 IS NULL OR endpoint0 = ?6 OR endpoint1 = ?6)
     ORDER BY row_id LIMIT ?7`,
  );
  // Rows by id: the ids are searched and the cursor filtered (`+`); in the statement above, SQLite
  // walks every row of the root past the cursor and tests each against the ids.
  const selectRowsByIds = database.prepare(
    `SELECT root, row_id, kind, payload, version FROM docscript_rows
     WHERE document_id = ?1 AND root = ?2 AND +row_id > ?3
       AND (?4 IS NULL OR kind IN (SELECT value FROM json_each(?4)))
       AND row_id IN (SELECT value FROM json_each(?5))
       AND (?6 IS NULL OR endpoint0 = ?6 OR endpoint1 = ?6)
     ORDER BY row_id LIMIT ?7`,
  );
  const selectCounts = database.prepare(
    "SELECT root, kind, count(*) AS n FROM docscript_rows WHERE document_id = ? GROUP BY root, kind",
  );
  const selectIssues = database.prepare("SELECT issues FROM docscript_projection WHERE document_id = ?");
  const selectMemberCounts = database.prepare(
    "SELECT type, kind, count AS n FROM docscript_counts WHERE document_id = ? AND count > 0",
  );
  const members = sqliteMemberReads(database);
  const { writeRows, clearRows, indexNumbers } = sqliteRowWrites(database);
  const toUpdates = (rows: unknown[]): LoggedUpdate[] =>
    rows.map((row) => {
      const record = row as { seq: number; bytes: Uint8Array };
      return { seq: Number(record.seq), bytes: new Uint8Array(record.bytes) };
    });

  return {
    async createDocument({ documentId, tokenHash, snapshot, rows, issues }) {
      return sqliteTransaction(database, () => {
        const result = insertDocument.run(documentId, tokenHash, snapshot, new Date().toISOString());
        if (Number(result.changes) !== 1) return false;
        if (rows !== undefined) {
          writeRows(documentId, rows, 0);
          setProjection.run(documentId, 0, JSON.stringify(issues ?? []));
        }
        return true;
      });
    },
    async tokenHash(documentId) {
      const row = selectToken.get(documentId) as { token_hash: string } | undefined;
      return row?.token_hash;
    },
    async load(documentId) {
      const row = selectDocument.get(documentId) as
        | { token_hash: string; snapshot: Uint8Array; snapshot_seq: number }
        | undefined;
      if (row === undefined) return undefined;
      const snapshotSeq = Number(row.snapshot_seq);
      return {
        tokenHash: row.token_hash,
        snapshot: new Uint8Array(row.snapshot),
        snapshotSeq,
        updates: toUpdates(selectUpdates.all(documentId, snapshotSeq)),
      };
    },
    async snapshotSeq(documentId) {
      const row = selectSnapshotSeq.get(documentId) as { snapshot_seq: number } | undefined;
      return row === undefined ? undefined : Number(row.snapshot_seq);
    },
    async updatesAfter(documentId, seq) {
      return toUpdates(selectUpdates.all(documentId, seq));
    },
    async append({ documentId, seq, bytes, status, actor, rows, change, issues }) {
      const at = new Date().toISOString();
      try {
        sqliteTransaction(database, () => {
          insertUpdate.run(documentId, seq, bytes, status, actor ?? null, at);
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
    async changes(documentId, { before, limit }) {
      const rows = selectChanges.all(documentId, before ?? Number.MAX_SAFE_INTEGER, limit + 1) as unknown[];
      return pageOf(
        rows.map((row) => changeOfRow(row as ChangeRow)),
        limit,
      );
    },
    async rowsSeq(documentId) {
      const row = selectRowsSeq.get(documentId) as { rows_seq: number | null } | undefined;
      return row?.rows_seq === null || row === undefined ? undefined : Number(row.rows_seq);
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
    async documentIssues(documentId) {
      const row = selectIssues.get(documentId) as { issues: string | null } | undefined;
      return row?.issues === null || row === undefined ? undefined : JSON.parse(row.issues);
    },
    async readMembers(documentId, query) {
      return members.readMembers(documentId, query);
    },
    async numbersIndexed(documentId) {
      return members.numbersIndexed(documentId);
    },
    async indexNumbers(documentId, numbersOf) {
      await indexNumbers(documentId, numbersOf);
    },
    async countMembers(documentId) {
      const rows = selectMemberCounts.all(documentId) as {
        type: "entity" | "relation";
        kind: string;
        n: number;
      }[];
      return rows.map((row) => ({ type: row.type, kind: row.kind, count: Number(row.n) }));
    },
    async readRows(documentId, query) {
      const json = (values: readonly string[] | undefined) =>
        values === undefined ? null : JSON.stringify(values);
      const rows = (query.ids === undefined ? selectRows : selectRowsByIds).all(
        documentId,
        query.root,
        query.after ?? "",
        json(query.kinds),
        json(query.ids),
        query.endpoint ?? null,
        query.limit,
      ) as { root: RowRoot; row_id: string; kind: string; payload: string; version: number }[];
      return rows.map(
        (row): ProjectedRow => ({
          root: row.root,
          rowId: row.row_id,
          kind: row.kind,
          json: JSON.parse(row.payload),
          version: Number(row.version),
        }),
      );
    },
    async countRows(documentId) {
      const rows = selectCounts.all(documentId) as { root: RowRoot; kind: string; n: number }[];
      return rows.map((row) => ({ root: row.root, kind: row.kind, count: Number(row.n) }));
    },
    async compact(documentId, snapshot, throughSeq) {
      sqliteTransaction(database, () => {
        updateSnapshot.run(snapshot, throughSeq, documentId, throughSeq);
        deleteUpdates.run(documentId, throughSeq);
      });
    },
    async close() {
      if (database.isOpen) database.close();
    },
  };
}
