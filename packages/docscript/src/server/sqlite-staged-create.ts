/**
 * The SQLite store's create (ADR 0560): a document's rows, members, numbers, maps and plans are written
 * in transactions of at most `sliceMs` each, the event loop let run between them, under its id claimed
 * first (its `docscript_documents` row, without a snapshot); the snapshot and the projection's row land
 * last, in one short transaction, and the document is there from then on (`created`: every read of a
 * document asks for its snapshot). One transaction of the 30,000 rows of a 5 MB snapshot held the event
 * loop 1.3–2.8 s; node:sqlite's calls are synchronous and the store has one connection, so a transaction
 * left open across turns of the loop would take in every other document's writes.
 *
 * A create that fails takes back what it wrote; one killed leaves its claim, which the next open of
 * the file takes back (`clearUnfinished`). A second create of a claimed id is refused as one of an
 * existing document is (false), as it was while the first one's single transaction ran.
 */
import type { DatabaseSync } from "node:sqlite";
import { sqliteTransaction } from "@tackle/storage";
import type { DocumentStore, RowChange } from "./document-store.ts";
import { sliceMs, yieldToEventLoop } from "./snapshot-history.ts";
import type { SqlitePlanIndex } from "./sqlite-plan-index.ts";
import type { SqliteRowWrites } from "./sqlite-row-writes.ts";

/** Rows per `writeRows` call inside a slice (the slice ends after the call past `sliceMs`). */
const rowsPerWrite = 100;

/** A document claimed and not yet created: no snapshot stored. */
const unfinished =
  "NOT EXISTS (SELECT 1 FROM docscript_snapshots WHERE document_id = docscript_documents.document_id)";

export interface SqliteStagedCreate {
  readonly createDocument: DocumentStore["createDocument"];
  /** Takes back every create a killed process left claimed (its rows, plans and claim). */
  clearUnfinished(): void;
}

export function sqliteStagedCreate(
  database: DatabaseSync,
  { writeRows, clearRows }: Pick<SqliteRowWrites, "writeRows" | "clearRows">,
  planIndex: SqlitePlanIndex,
): SqliteStagedCreate {
  const claim = database.prepare(
    "INSERT INTO docscript_documents (document_id, token_hash, snapshot_seq, snapshot_version, created_at) VALUES (?, ?, 0, ?, ?) ON CONFLICT DO NOTHING",
  );
  // Ours still: claimed at `at` with this token, and not created. A slice written under any other
  // (another process took the claim back and the id was claimed again) would mix two documents.
  const selectClaim = database.prepare(
    `SELECT 1 AS held FROM docscript_documents WHERE document_id = ? AND created_at = ? AND token_hash = ?
       AND ${unfinished}`,
  );
  const selectUnfinished = database.prepare(
    `SELECT document_id FROM docscript_documents WHERE ${unfinished}`,
  );
  const deleteClaim = database.prepare(
    `DELETE FROM docscript_documents WHERE document_id = ? AND ${unfinished}`,
  );
  const deletePlans = database.prepare("DELETE FROM docscript_plans WHERE document_id = ?");
  // The snapshot has a table of its own (migration 12): the documents row stays small to read.
  const insertSnapshot = database.prepare(
    "INSERT INTO docscript_snapshots (document_id, snapshot) VALUES (?, ?)",
  );
  // Rows written whole (a new document): every entity's numbers are indexed.
  const insertProjection = database.prepare(
    "INSERT INTO docscript_projection (document_id, rows_seq, issues, numbers_indexed) VALUES (?, 0, ?, 1)",
  );

  /** Everything written under a claimed id, and the claim, in one transaction. */
  const takeBack = (documentId: string) =>
    sqliteTransaction(database, () => {
      clearRows(documentId);
      deletePlans.run(documentId);
      deleteClaim.run(documentId);
    });

  /** Runs `write(from)` (it answers where the next starts) in transactions of about `sliceMs`. */
  const inSlices = async (ownClaim: () => void, length: number, write: (from: number) => number) => {
    let next = 0;
    while (next < length) {
      await yieldToEventLoop();
      sqliteTransaction(database, () => {
        ownClaim();
        const started = performance.now();
        do next = write(next);
        while (next < length && performance.now() - started < sliceMs);
      });
    }
  };

  return {
    async createDocument({ documentId, tokenHash, snapshot, snapshotVersion, rows, issues, plans }) {
      const at = new Date().toISOString();
      const claimed = sqliteTransaction(
        database,
        () => Number(claim.run(documentId, tokenHash, snapshotVersion ?? null, at).changes) === 1,
      );
      if (!claimed) return false;
      const ownClaim = () => {
        if (selectClaim.get(documentId, at, tokenHash) === undefined)
          throw new Error(`the create of ${documentId} lost its claim (taken back by another open)`);
      };
      try {
        const given: readonly RowChange[] = rows ?? [];
        await inSlices(ownClaim, given.length, (from) => {
          // Nothing is held under a claim just made (its children need it: foreign keys).
          writeRows(documentId, given.slice(from, from + rowsPerWrite), 0, true);
          return from + rowsPerWrite;
        });
        const planned = [...(plans ?? [])];
        await inSlices(ownClaim, planned.length, (from) => {
          planIndex.recordPlans(documentId, new Map(planned.slice(from, from + rowsPerWrite)));
          return from + rowsPerWrite;
        });
        await yieldToEventLoop();
        sqliteTransaction(database, () => {
          ownClaim();
          if (rows !== undefined) insertProjection.run(documentId, JSON.stringify(issues ?? []));
          if (plans !== undefined) planIndex.markIndexed(documentId);
          insertSnapshot.run(documentId, snapshot);
        });
        return true;
      } catch (error) {
        // Not ours any more (taken back by another open of the file): nothing of ours is left to take.
        if (database.isOpen && selectClaim.get(documentId, at, tokenHash) !== undefined) takeBack(documentId);
        throw error;
      }
    },
    clearUnfinished() {
      for (const row of selectUnfinished.all() as { document_id: string }[]) takeBack(row.document_id);
    },
  };
}
