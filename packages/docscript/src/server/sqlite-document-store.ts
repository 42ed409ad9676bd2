/** The embedded document store: one SQLite file (node:sqlite), an update log and compacted snapshots. */
import type { StatementSync } from "node:sqlite";
import { openMigratedSqlite, sqliteTransaction } from "@tackle/storage";
import { type ChangeRow, changeOfRow, changeValues, pageOf } from "./change-log.ts";
import {
  type DocumentStore,
  type FoundMember,
  type LoggedUpdate,
  type MemberQuery,
  type ProjectedRow,
  type RowChange,
  type RowRoot,
  rowColumns,
  StoreConflictError,
} from "./document-store.ts";
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
  const upsertRow = database.prepare(
    `INSERT INTO docscript_rows (document_id, root, row_id, kind, payload, endpoint0, endpoint1, version)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (document_id, root, row_id) DO UPDATE SET kind = excluded.kind, payload = excluded.payload,
       endpoint0 = excluded.endpoint0, endpoint1 = excluded.endpoint1, version = excluded.version`,
  );
  const deleteRow = database.prepare(
    "DELETE FROM docscript_rows WHERE document_id = ? AND root = ? AND row_id = ?",
  );
  const deleteRows = database.prepare("DELETE FROM docscript_rows WHERE document_id = ?");
  const selectRowsSeq = database.prepare("SELECT rows_seq FROM docscript_projection WHERE document_id = ?");
  const selectLastSeq = database.prepare(
    `SELECT max(coalesce((SELECT max(seq) FROM docscript_updates WHERE document_id = ?1), 0), snapshot_seq) AS seq
     FROM docscript_documents WHERE document_id = ?1`,
  );
  const advanceRowsSeq = database.prepare(
    "UPDATE docscript_projection SET rows_seq = ?1, issues = ?4 WHERE document_id = ?2 AND rows_seq = ?3",
  );
  const setProjection = database.prepare(
    `INSERT INTO docscript_projection (document_id, rows_seq, issues) VALUES (?1, ?2, ?3)
     ON CONFLICT (document_id) DO UPDATE SET rows_seq = excluded.rows_seq, issues = excluded.issues`,
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
  // What a row projected to before, so the counts per kind lose it.
  const deleteMembersOfRow = database.prepare(
    "DELETE FROM docscript_members WHERE document_id = ? AND root = ? AND row_id = ? RETURNING type, kind",
  );
  const deleteMembers = database.prepare("DELETE FROM docscript_members WHERE document_id = ?");
  // A row naming one member twice keeps its first (as on PostgreSQL); only what lands is counted.
  const insertMember = database.prepare(
    `INSERT OR IGNORE INTO docscript_members
       (document_id, type, member_id, kind, root, row_id, endpoint0, endpoint1, variant_of, identity)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const addCount = database.prepare(
    `INSERT INTO docscript_counts (document_id, type, kind, count) VALUES (?, ?, ?, ?)
     ON CONFLICT (document_id, type, kind) DO UPDATE SET count = count + excluded.count`,
  );
  const deleteEmptyCounts = database.prepare(
    "DELETE FROM docscript_counts WHERE document_id = ? AND count <= 0",
  );
  const deleteCounts = database.prepare("DELETE FROM docscript_counts WHERE document_id = ?");
  const selectIssues = database.prepare("SELECT issues FROM docscript_projection WHERE document_id = ?");
  // Members with their rows: one statement per set of filters given (prepared once), each filter an
  // equality or a JSON array the statement names only when given, so SQLite takes the index that finds
  // the few rows asked for: by endpoint (its two indexes, unioned), variant, identity, id, kind. `+`
  // keeps it off the primary key's (document, type, id) range where another index applies.
  const memberStatements = new Map<string, StatementSync>();
  const memberStatement = (query: MemberQuery): StatementSync => {
    const by = {
      kinds: query.kinds !== undefined,
      ids: query.ids !== undefined,
      endpoint: query.endpoint !== undefined,
      endpoints: query.endpoints !== undefined,
      variantOf: query.variantOf !== undefined,
      identity: query.identity !== undefined,
    };
    const key = JSON.stringify(by);
    const known = memberStatements.get(key);
    if (known !== undefined) return known;
    const plus = by.endpoint || by.endpoints || by.variantOf || by.identity ? "+" : "";
    // With ids, the cursor is filtered, not searched: as a range it has SQLite walk every member of
    // the type past it and test each against the ids (2 ms a lookup at 100k), not find the ids.
    const where = [`${plus}m.type = :type`, `${plus || by.ids ? "+" : ""}m.member_id > :after`];
    if (by.kinds) where.push("m.kind IN (SELECT value FROM json_each(:kinds))");
    if (by.ids) where.push("m.member_id IN (SELECT value FROM json_each(:ids))");
    if (by.variantOf) where.push("m.variant_of = :variantOf");
    if (by.identity) where.push("m.identity = :identity");
    const source = by.endpoint
      ? `(SELECT * FROM docscript_members WHERE document_id = :documentId AND endpoint0 = :endpoint
          UNION ALL
          SELECT * FROM docscript_members
          WHERE document_id = :documentId AND endpoint1 = :endpoint AND endpoint0 IS NOT :endpoint)`
      : by.endpoints
        ? `(SELECT * FROM docscript_members WHERE document_id = :documentId AND endpoint0 IS NOT NULL
              AND endpoint0 IN (SELECT value FROM json_each(:endpoints))
            UNION ALL
            SELECT * FROM docscript_members WHERE document_id = :documentId AND endpoint1 IS NOT NULL
              AND endpoint1 IN (SELECT value FROM json_each(:endpoints))
              AND (endpoint0 IS NULL OR endpoint0 NOT IN (SELECT value FROM json_each(:endpoints))))`
        : "docscript_members";
    if (!by.endpoint && !by.endpoints) where.unshift("m.document_id = :documentId");
    const statement = database.prepare(
      `SELECT m.type, m.member_id, m.kind, m.root, m.row_id, m.endpoint0, m.endpoint1, m.variant_of,
              m.identity, r.payload
       FROM ${source} m
       JOIN docscript_rows r ON r.document_id = m.document_id AND r.root = m.root AND r.row_id = m.row_id
       WHERE ${where.join(" AND ")}
       ORDER BY m.member_id, m.row_id LIMIT :limit`,
    );
    memberStatements.set(key, statement);
    return statement;
  };
  const selectMemberCounts = database.prepare(
    "SELECT type, kind, count AS n FROM docscript_counts WHERE document_id = ? AND count > 0",
  );
  /** Writes rows and their members, and moves the counts per kind by what left and what landed. */
  const writeRows = (documentId: string, rows: readonly RowChange[], version: number): void => {
    const deltas = new Map<string, number>();
    const count = (type: string, kind: string, by: number) => {
      const key = JSON.stringify([type, kind]);
      deltas.set(key, (deltas.get(key) ?? 0) + by);
    };
    for (const change of rows) {
      for (const gone of deleteMembersOfRow.all(documentId, change.root, change.rowId) as {
        type: string;
        kind: string;
      }[])
        count(gone.type, gone.kind, -1);
      for (const member of change.members ?? []) {
        const inserted = insertMember.run(
          documentId,
          member.type,
          member.id,
          member.kind,
          change.root,
          change.rowId,
          member.endpoint0 ?? null,
          member.endpoint1 ?? null,
          member.variantOf ?? null,
          member.identity ?? null,
        );
        if (Number(inserted.changes) === 1) count(member.type, member.kind, 1);
      }
      if (change.json === undefined) {
        deleteRow.run(documentId, change.root, change.rowId);
        continue;
      }
      const columns = rowColumns(change);
      upsertRow.run(
        documentId,
        change.root,
        change.rowId,
        columns.kind,
        columns.payload,
        columns.endpoint0,
        columns.endpoint1,
        version,
      );
    }
    for (const [key, by] of deltas) {
      if (by === 0) continue;
      const [type, kind] = JSON.parse(key) as [string, string];
      addCount.run(documentId, type, kind, by);
    }
    deleteEmptyCounts.run(documentId);
  };
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
        deleteRows.run(documentId);
        deleteMembers.run(documentId);
        deleteCounts.run(documentId);
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
      const parameters: Record<string, string | number> = {
        documentId,
        type: query.type,
        after: query.after ?? "",
        limit: query.limit,
      };
      if (query.kinds !== undefined) parameters.kinds = JSON.stringify(query.kinds);
      if (query.ids !== undefined) parameters.ids = JSON.stringify(query.ids);
      if (query.endpoint !== undefined) parameters.endpoint = query.endpoint;
      if (query.endpoints !== undefined) parameters.endpoints = JSON.stringify(query.endpoints);
      if (query.variantOf !== undefined) parameters.variantOf = query.variantOf;
      if (query.identity !== undefined) parameters.identity = query.identity;
      const rows = memberStatement(query).all(parameters) as unknown as MemberRecord[];
      return rows.map(toMember);
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

interface MemberRecord {
  type: "entity" | "relation";
  member_id: string;
  kind: string;
  root: RowRoot;
  row_id: string;
  endpoint0: string | null;
  endpoint1: string | null;
  variant_of: string | null;
  identity: string | null;
  payload: string;
}

/** A member as a query found it (both stores). */
export function toMember(record: MemberRecord): FoundMember {
  return {
    type: record.type,
    id: record.member_id,
    kind: record.kind,
    root: record.root,
    rowId: record.row_id,
    json: JSON.parse(record.payload),
    ...(record.endpoint0 === null ? {} : { endpoint0: record.endpoint0 }),
    ...(record.endpoint1 === null ? {} : { endpoint1: record.endpoint1 }),
    ...(record.variant_of === null ? {} : { variantOf: record.variant_of }),
    ...(record.identity === null ? {} : { identity: record.identity }),
  };
}
