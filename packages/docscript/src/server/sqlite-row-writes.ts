/**
 * The SQLite store's writes of a document's rows: each row with the entities and relations it projects
 * to, their number fields (the window index, migration 7), its maps (the container index, migration
 * 13) and the counts per kind, moved by what left and what landed — always inside the caller's
 * transaction.
 */
import type { DatabaseSync } from "node:sqlite";
import { sqliteTransaction } from "@tackle/storage";
import { type RowChange, type RowMember, type RowRoot, rowColumns } from "./document-store.ts";
import { movedNumbers, type NumberEntry, sameButNumbers } from "./member-changes.ts";
import { numberEntries } from "./member-record.ts";
import { sqliteContainerIndex } from "./sqlite-container-index.ts";

/** Rows per transaction when an older document's numbers are indexed from its stored rows. */
const indexChunk = 5_000;

export interface SqliteRowWrites {
  /**
   * Writes rows and their members, numbers and maps, and moves the counts per kind. `fresh`: the
   * document holds nothing of these rows yet (a create under its new claim, ADR 0560), so what they
   * held before is not looked for.
   */
  writeRows(documentId: string, rows: readonly RowChange[], version: number, fresh?: boolean): void;
  /** Deletes every row, member, number, map and count of the document. */
  clearRows(documentId: string): void;
  /**
   * Indexes the number fields of every stored row of a document stored before the index, a chunk of
   * rows per transaction, letting other work run between chunks (an append meanwhile writes its rows'
   * numbers itself; a chunk after it reads the rows as the append left them).
   */
  indexNumbers(
    documentId: string,
    numbersOf: (root: RowRoot, rowId: string, json: unknown) => readonly RowMember[],
  ): Promise<void>;
}

/** The statements the row writes use, prepared once per database. */
function rowStatements(database: DatabaseSync) {
  const upsertRow = database.prepare(
    `INSERT INTO docscript_rows (document_id, root, row_id, kind, payload, endpoint0, endpoint1, version)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (document_id, root, row_id) DO UPDATE SET kind = excluded.kind, payload = excluded.payload,
       endpoint0 = excluded.endpoint0, endpoint1 = excluded.endpoint1, version = excluded.version`,
  );
  // A row whose members stay (a write of fields): its kind and endpoints stand, and so do their index
  // entries, which the upsert's SET of every column would rewrite (a shift's 33,000 rows: ~2x faster).
  const updatePayload = database.prepare(
    "UPDATE docscript_rows SET payload = ?, version = ? WHERE document_id = ? AND root = ? AND row_id = ?",
  );
  const deleteRow = database.prepare(
    "DELETE FROM docscript_rows WHERE document_id = ? AND root = ? AND row_id = ?",
  );
  // What a row projected to before, so the counts per kind lose it.
  const deleteMembersOfRow = database.prepare(
    "DELETE FROM docscript_members WHERE document_id = ? AND root = ? AND row_id = ? RETURNING type, kind",
  );
  // A row naming one member twice keeps its first (as on PostgreSQL); only what lands is counted.
  const insertMember = database.prepare(
    `INSERT OR IGNORE INTO docscript_members
       (document_id, type, member_id, kind, root, row_id, endpoint0, endpoint1, variant_of, identity)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const selectMembersOfRow = database.prepare(
    // By the row index: left to itself, SQLite scans the document's members in the primary key.
    `SELECT type, member_id FROM docscript_members INDEXED BY docscript_members_row
       WHERE document_id = ? AND root = ? AND row_id = ?`,
  );
  const deleteNumbersOfRow = database.prepare(
    "DELETE FROM docscript_numbers WHERE document_id = ? AND root = ? AND row_id = ?",
  );
  const insertNumber = database.prepare(
    `INSERT INTO docscript_numbers (document_id, kind, field, value, member_id, root, row_id)
     VALUES (?, ?, ?, ?, ?, ?, ?)`,
  );
  // A number changed in place: the row index finds the row's few numbers.
  const updateNumber = database.prepare(
    `UPDATE docscript_numbers SET value = ?
       WHERE document_id = ? AND root = ? AND row_id = ? AND member_id = ? AND field = ?`,
  );
  const addCount = database.prepare(
    `INSERT INTO docscript_counts (document_id, type, kind, count) VALUES (?, ?, ?, ?)
     ON CONFLICT (document_id, type, kind) DO UPDATE SET count = count + excluded.count`,
  );
  const deleteEmptyCounts = database.prepare(
    "DELETE FROM docscript_counts WHERE document_id = ? AND count <= 0",
  );
  const clears = [
    "docscript_rows",
    "docscript_members",
    "docscript_numbers",
    "docscript_containers",
    "docscript_counts",
  ].map((table) => database.prepare(`DELETE FROM ${table} WHERE document_id = ?`));
  const selectRowsAfter = database.prepare(
    `SELECT root, row_id, payload FROM docscript_rows WHERE document_id = ? AND (root, row_id) > (?, ?)
     ORDER BY root, row_id LIMIT ?`,
  );
  const setNumbersIndexed = database.prepare(
    "UPDATE docscript_projection SET numbers_indexed = 1 WHERE document_id = ?",
  );

  return {
    upsertRow,
    updatePayload,
    deleteRow,
    deleteMembersOfRow,
    selectMembersOfRow,
    insertMember,
    deleteNumbersOfRow,
    insertNumber,
    updateNumber,
    addCount,
    deleteEmptyCounts,
    clears,
    selectRowsAfter,
    setNumbersIndexed,
    containers: sqliteContainerIndex(database),
  };
}

type RowStatements = ReturnType<typeof rowStatements>;

/** A row's members that land (the first of an id twice), their numbers with them. */
function insertMembers(
  statements: RowStatements,
  documentId: string,
  change: RowChange,
): { type: string; kind: string }[] {
  const landed: { type: string; kind: string }[] = [];
  const members = change.members ?? [];
  for (const member of members) {
    const inserted = statements.insertMember.run(
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
    if (Number(inserted.changes) !== 1) continue;
    landed.push(member);
    insertNumbers(statements, documentId, change.root, change.rowId, numberEntries([member]));
  }
  return landed;
}

/** Indexes number fields under their row (the window index, ADR 0480). */
function insertNumbers(
  statements: RowStatements,
  documentId: string,
  root: RowRoot,
  rowId: string,
  entries: Iterable<NumberEntry>,
): void {
  for (const entry of entries)
    statements.insertNumber.run(
      documentId,
      entry.kind,
      entry.field,
      entry.value,
      entry.memberId,
      root,
      rowId,
    );
}

function upsertRow(statements: RowStatements, documentId: string, change: RowChange, version: number): void {
  const columns = rowColumns(change);
  statements.upsertRow.run(
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

/**
 * A row's numbers written again, its members left as they are: those of the members it holds (the
 * first of an id twice, as `insertMembers` lands them).
 */
function rewriteNumbers(statements: RowStatements, documentId: string, change: RowChange): void {
  const held = new Set(
    (
      statements.selectMembersOfRow.all(documentId, change.root, change.rowId) as {
        type: string;
        member_id: string;
      }[]
    ).map((member) => `${member.type}\u0000${member.member_id}`),
  );
  statements.deleteNumbersOfRow.run(documentId, change.root, change.rowId);
  const written = new Set<string>();
  for (const member of change.members ?? []) {
    const key = `${member.type}\u0000${member.id}`;
    if (!held.has(key) || written.has(key)) continue;
    written.add(key);
    insertNumbers(statements, documentId, change.root, change.rowId, numberEntries([member]));
  }
}

/**
 * A row's changed numbers updated in place when it holds the same number fields as before, only
 * their values moved (a shift's markers): what the row held is not read, nor its numbers deleted and
 * inserted (ADR 0496). False when the fields differ or a member comes twice: the caller rewrites the
 * numbers then.
 */
function updateNumbers(statements: RowStatements, documentId: string, change: RowChange): boolean {
  const moved = movedNumbers(change);
  if (moved === undefined) return false;
  for (const [member, field, value] of moved)
    statements.updateNumber.run(value, documentId, change.root, change.rowId, member, field);
  return true;
}

/** Writes rows and their members, numbers and maps, and moves the counts per kind. */
function writeRows(
  statements: RowStatements,
  documentId: string,
  rows: readonly RowChange[],
  version: number,
  fresh = false,
): void {
  const deltas = new Map<string, number>();
  const count = (type: string, kind: string, by: number) => {
    const key = JSON.stringify([type, kind]);
    deltas.set(key, (deltas.get(key) ?? 0) + by);
  };
  for (const change of rows) {
    if (fresh) {
      statements.containers.writeRow(documentId, change, true);
      for (const member of insertMembers(statements, documentId, change)) count(member.type, member.kind, 1);
      if (change.json !== undefined) upsertRow(statements, documentId, change, version);
      continue;
    }
    // Before the fast path below: a row kept with its maps (a shift's rows) writes nothing here.
    statements.containers.writeRow(documentId, change);
    if (sameButNumbers(change)) {
      if (!updateNumbers(statements, documentId, change)) rewriteNumbers(statements, documentId, change);
      const { payload } = rowColumns(change);
      const updated = statements.updatePayload.run(payload, version, documentId, change.root, change.rowId);
      if (Number(updated.changes) !== 1) upsertRow(statements, documentId, change, version);
      continue;
    }
    for (const gone of statements.deleteMembersOfRow.all(documentId, change.root, change.rowId) as {
      type: string;
      kind: string;
    }[])
      count(gone.type, gone.kind, -1);
    statements.deleteNumbersOfRow.run(documentId, change.root, change.rowId);
    for (const member of insertMembers(statements, documentId, change)) count(member.type, member.kind, 1);
    if (change.json === undefined) {
      statements.deleteRow.run(documentId, change.root, change.rowId);
      continue;
    }
    upsertRow(statements, documentId, change, version);
  }
  for (const [key, by] of deltas) {
    if (by === 0) continue;
    const [type, kind] = JSON.parse(key) as [string, string];
    statements.addCount.run(documentId, type, kind, by);
  }
  statements.deleteEmptyCounts.run(documentId);
}

/** Indexes an older document's number fields from its stored rows, a chunk per transaction. */
async function indexNumbers(
  database: DatabaseSync,
  statements: RowStatements,
  documentId: string,
  numbersOf: (root: RowRoot, rowId: string, json: unknown) => readonly RowMember[],
): Promise<void> {
  let after: [string, string] = ["", ""];
  for (;;) {
    await new Promise((resolve) => setImmediate(resolve));
    const done = sqliteTransaction(database, () => {
      const rows = statements.selectRowsAfter.all(documentId, after[0], after[1], indexChunk) as {
        root: RowRoot;
        row_id: string;
        payload: string;
      }[];
      for (const row of rows) {
        statements.deleteNumbersOfRow.run(documentId, row.root, row.row_id);
        const members = numbersOf(row.root, row.row_id, JSON.parse(row.payload));
        const seen = new Set<string>();
        // A row naming one member twice indexes its first, as its members keep it.
        const firsts = [...numberEntries(members)].filter((entry) => {
          const key = `${entry.memberId}\u0000${entry.field}`;
          if (seen.has(key)) return false;
          seen.add(key);
          return true;
        });
        insertNumbers(statements, documentId, row.root, row.row_id, firsts);
      }
      const last = rows.at(-1);
      if (last !== undefined) after = [last.root, last.row_id];
      if (rows.length < indexChunk) statements.setNumbersIndexed.run(documentId);
      return rows.length < indexChunk;
    });
    if (done) return;
  }
}

export function sqliteRowWrites(database: DatabaseSync): SqliteRowWrites {
  const statements = rowStatements(database);
  return {
    writeRows: (documentId, rows, version, fresh) => writeRows(statements, documentId, rows, version, fresh),
    clearRows(documentId) {
      for (const clear of statements.clears) clear.run(documentId);
    },
    indexNumbers: (documentId, numbersOf) => indexNumbers(database, statements, documentId, numbersOf),
  };
}
