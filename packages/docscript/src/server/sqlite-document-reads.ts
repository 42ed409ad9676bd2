/** The embedded store's reads: a document's token, snapshot and log, its change log, and its rows. */
import type { DatabaseSync } from "node:sqlite";
import { sqliteDialect as sql } from "@tackle/storage";
import { type ChangeRow, changeOfRow, pageOf } from "./change-log.ts";
import type { DocumentStore, LoggedUpdate, ProjectedRow, RowRoot, StoredHead } from "./document-store.ts";
import { sqliteMemberReads } from "./sqlite-member-reads.ts";

/** Rows of the update log as the store hands them out (bytes copied off SQLite's buffer). */
export const toUpdates = (rows: unknown[]): LoggedUpdate[] =>
  rows.map((row) => {
    const record = row as { seq: number; bytes: Uint8Array };
    return { seq: Number(record.seq), bytes: new Uint8Array(record.bytes) };
  });

type SqliteReads = Pick<
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
  | "readMembers"
  | "numbersIndexed"
  | "countMembers"
  | "readRows"
  | "countRows"
>;

/**
 * A document is there once its snapshot is: a large create writes its rows under a claimed id first,
 * in slices, and stores the snapshot last (ADR 0560, `sqlite-staged-create.ts`). `?1` is the id.
 */
export const created = "EXISTS (SELECT 1 FROM docscript_snapshots WHERE document_id = ?1)";

export function sqliteDocumentReads(database: DatabaseSync): SqliteReads {
  const selectDocument = database.prepare(
    `SELECT token_hash, snapshot, snapshot_seq, snapshot_version
     FROM docscript_documents JOIN docscript_snapshots USING (document_id) WHERE document_id = ?`,
  );
  // What a page needs: never the snapshot (168 MB at 1M entities, seconds to read).
  const selectHead = database.prepare(
    `SELECT token_hash, snapshot_seq, snapshot_version FROM docscript_documents WHERE document_id = ?1
       AND ${created}`,
  );
  const updateSnapshotVersion = database.prepare(
    "UPDATE docscript_documents SET snapshot_version = ? WHERE document_id = ? AND snapshot_seq = ? AND snapshot_version IS NULL",
  );
  const selectToken = database.prepare(
    `SELECT token_hash FROM docscript_documents WHERE document_id = ?1 AND ${created}`,
  );
  // Asked before every push: the seq alone, never the snapshot beside it (16 MB at 100k entities).
  const selectSnapshotSeq = database.prepare(
    `SELECT snapshot_seq FROM docscript_documents WHERE document_id = ?1 AND ${created}`,
  );
  const selectUpdates = database.prepare(
    "SELECT seq, bytes FROM docscript_updates WHERE document_id = ? AND seq > ? ORDER BY seq",
  );
  const selectChanges = database.prepare(
    "SELECT * FROM docscript_changes WHERE document_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
  );
  const selectRowsSeq = database.prepare("SELECT rows_seq FROM docscript_projection WHERE document_id = ?");
  const selectIssues = database.prepare("SELECT issues FROM docscript_projection WHERE document_id = ?");
  const selectMemberCounts = database.prepare(
    "SELECT type, kind, count AS n FROM docscript_counts WHERE document_id = ? AND count > 0",
  );
  const members = sqliteMemberReads(database);
  type HeadRow = { token_hash: string; snapshot_seq: number; snapshot_version: Uint8Array | null };
  const headOf = (documentId: string, row: HeadRow): StoredHead => {
    const snapshotSeq = Number(row.snapshot_seq);
    return {
      tokenHash: row.token_hash,
      snapshotSeq,
      snapshotVersion: row.snapshot_version === null ? undefined : new Uint8Array(row.snapshot_version),
      updates: toUpdates(selectUpdates.all(documentId, snapshotSeq)),
    };
  };
  return {
    async tokenHash(documentId) {
      const row = selectToken.get(documentId) as { token_hash: string } | undefined;
      return row?.token_hash;
    },
    async load(documentId) {
      const row = selectDocument.get(documentId) as (HeadRow & { snapshot: Uint8Array }) | undefined;
      if (row === undefined) return undefined;
      return { ...headOf(documentId, row), snapshot: new Uint8Array(row.snapshot) };
    },
    async loadHead(documentId) {
      const row = selectHead.get(documentId) as HeadRow | undefined;
      return row === undefined ? undefined : headOf(documentId, row);
    },
    async keepSnapshotVersion(documentId, snapshotSeq, version) {
      updateSnapshotVersion.run(version, documentId, snapshotSeq);
    },
    async snapshotSeq(documentId) {
      const row = selectSnapshotSeq.get(documentId) as { snapshot_seq: number } | undefined;
      return row === undefined ? undefined : Number(row.snapshot_seq);
    },
    async updatesAfter(documentId, seq) {
      return toUpdates(selectUpdates.all(documentId, seq));
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
    async countMembers(documentId) {
      const rows = selectMemberCounts.all(documentId) as {
        type: "entity" | "relation";
        kind: string;
        n: number;
      }[];
      return rows.map((row) => ({ type: row.type, kind: row.kind, count: Number(row.n) }));
    },
    ...sqliteRowPages(database),
  };
}

/** Pages of a root's rows, filtered by kind, id and endpoint, and the rows counted by kind. */
function sqliteRowPages(database: DatabaseSync): Pick<DocumentStore, "readRows" | "countRows"> {
  // Optional filters are lists bound as the dialect binds them (NULL: no filter), so one prepared
  // statement serves every page.
  const selectRows = database.prepare(
    `SELECT root, row_id, kind, payload, version FROM docscript_rows
     WHERE document_id = ?1 AND root = ?2 AND row_id > ?3
       AND (?4 IS NULL OR ${sql.anyOf("kind", 4)})
       AND (?5 IS NULL OR ${sql.anyOf("row_id", 5)})
       AND (?6 IS NULL OR endpoint0 = ?6 OR endpoint1 = ?6)
     ORDER BY row_id LIMIT ?7`,
  );
  // Rows by id: the ids are searched and the cursor filtered (`+`); in the statement above, SQLite
  // walks every row of the root past the cursor and tests each against the ids.
  const selectRowsByIds = database.prepare(
    `SELECT root, row_id, kind, payload, version FROM docscript_rows
     WHERE document_id = ?1 AND root = ?2 AND +row_id > ?3
       AND (?4 IS NULL OR ${sql.anyOf("kind", 4)})
       AND ${sql.anyOf("row_id", 5)}
       AND (?6 IS NULL OR endpoint0 = ?6 OR endpoint1 = ?6)
     ORDER BY row_id LIMIT ?7`,
  );
  const selectCounts = database.prepare(
    "SELECT root, kind, count(*) AS n FROM docscript_rows WHERE document_id = ? GROUP BY root, kind",
  );
  return {
    async readRows(documentId, query) {
      const json = (values: readonly string[] | undefined) =>
        values === undefined ? null : (sql.list(values) as string);
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
  };
}
