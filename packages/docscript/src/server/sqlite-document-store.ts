/** The embedded document store: one SQLite file (node:sqlite), an update log and compacted snapshots. */
import { openMigratedSqlite, sqliteTransaction } from "@tackle/storage";
import { type DocumentStore, type LoggedUpdate, StoreConflictError } from "./document-store.ts";
import { sqliteMigrations } from "./migrations.ts";

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
  const selectUpdates = database.prepare(
    "SELECT seq, bytes FROM docscript_updates WHERE document_id = ? AND seq > ? ORDER BY seq",
  );
  const insertUpdate = database.prepare(
    "INSERT INTO docscript_updates (document_id, seq, bytes, status, actor, created_at) VALUES (?, ?, ?, ?, ?, ?)",
  );
  const updateSnapshot = database.prepare(
    "UPDATE docscript_documents SET snapshot = ?, snapshot_seq = ? WHERE document_id = ? AND snapshot_seq < ?",
  );
  const deleteUpdates = database.prepare("DELETE FROM docscript_updates WHERE document_id = ? AND seq <= ?");
  const toUpdates = (rows: unknown[]): LoggedUpdate[] =>
    rows.map((row) => {
      const record = row as { seq: number; bytes: Uint8Array };
      return { seq: Number(record.seq), bytes: new Uint8Array(record.bytes) };
    });

  return {
    async createDocument({ documentId, tokenHash, snapshot }) {
      const result = insertDocument.run(documentId, tokenHash, snapshot, new Date().toISOString());
      return Number(result.changes) === 1;
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
      const row = selectDocument.get(documentId) as { snapshot_seq: number } | undefined;
      return row === undefined ? undefined : Number(row.snapshot_seq);
    },
    async updatesAfter(documentId, seq) {
      return toUpdates(selectUpdates.all(documentId, seq));
    },
    async append({ documentId, seq, bytes, status, actor }) {
      try {
        insertUpdate.run(documentId, seq, bytes, status, actor ?? null, new Date().toISOString());
      } catch (error) {
        if (/UNIQUE|PRIMARY KEY/i.test(String((error as Error).message)))
          throw new StoreConflictError(documentId, seq, error);
        throw error;
      }
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
