/**
 * The SQLite store's create (ADR 0560): a document's rows, members, numbers, maps and plans are written
 * in transactions of at most `sliceMs` each, the event loop let run between them, under its id claimed
 * first (its `docscript_documents` row, without a snapshot); the snapshot and the projection's row land
 * last, in one short transaction, and the document is there from then on (`created`: every read of a
 * document asks for its snapshot). One transaction of the 30,000 rows of a 5 MB snapshot held the event
 * loop 1.3–2.8 s; node:sqlite's calls are synchronous and the store has one connection, so a transaction
 * left open across turns of the loop would take in every other document's writes.
 *
 * A claim is held under a lease (ADR 0562): the create's own token (`claim_owner`) and a time
 * (`lease_until`, ms since the epoch by `Date.now()` in every process) that every slice renews. Only a
 * claim past its lease is taken back: by the next open of the file (`clearUnfinished`), or by a create
 * of its id, which then goes on. A second create of a claim still held is refused as one of an existing
 * document is (false), as it was while the first one's single transaction ran. A create that finds its
 * claim taken back (its process stalled past the lease) throws and writes nothing more.
 */
import { randomUUID } from "node:crypto";
import type { DatabaseSync } from "node:sqlite";
import { sqliteTransaction } from "@tackle/storage";
import type { DocumentStore, RowChange } from "./document-store.ts";
import { sliceMs, yieldToEventLoop } from "./snapshot-history.ts";
import type { SqlitePlanIndex } from "./sqlite-plan-index.ts";
import type { SqliteRowWrites } from "./sqlite-row-writes.ts";

/** Rows per `writeRows` call inside a slice (the slice ends after the call past `sliceMs`). */
const rowsPerWrite = 100;
/** Rows per delete of a lapsed claim's leftovers inside a slice. */
const rowsPerDelete = 500;
/** The tables a claim's rows, members, numbers, maps, counts and plans are written to. */
const leftoverTables = [
  "docscript_rows",
  "docscript_members",
  "docscript_numbers",
  "docscript_containers",
  "docscript_counts",
  "docscript_plans",
];

/**
 * How long a claim holds its id unrenewed, by default: renewed every slice (~20 ms apart), it outlasts
 * SQLite's 5 s busy timeout (a slice waiting on another process's write lock) three times over, and
 * bounds how long a killed create refuses its id.
 */
export const defaultClaimLeaseMs = 15_000;

/** A document claimed and not yet created: no snapshot stored. */
const unfinished =
  "NOT EXISTS (SELECT 1 FROM docscript_snapshots WHERE document_id = docscript_documents.document_id)";
/** A claim whose lease ran out at `?2` (or one made before leases: migration 14). */
const lapsed = `${unfinished} AND (lease_until IS NULL OR lease_until < ?2)`;

export interface SqliteStagedCreate {
  readonly createDocument: DocumentStore["createDocument"];
  /** Takes back every claim past its lease (a killed or stalled create's rows, plans and claim). */
  clearUnfinished(): void;
}

/** The error a create throws when its claim was taken back before its snapshot was stored. */
export class ClaimLostError extends Error {
  readonly documentId: string;
  constructor(documentId: string) {
    super(`the create of ${documentId} lost its claim: its lease ran out and it was taken back`);
    this.name = "ClaimLostError";
    this.documentId = documentId;
  }
}

/** The statements of a staged create, prepared once per store. */
function createStatements(database: DatabaseSync) {
  const claim = database.prepare(
    `INSERT INTO docscript_documents
       (document_id, token_hash, snapshot_seq, snapshot_version, created_at, claim_owner, lease_until)
     VALUES (?, ?, 0, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
  );
  // Ours still (this create's token, not created), its lease renewed. Under any other claim (taken
  // back and claimed again) a slice would mix two documents.
  const renewClaim = database.prepare(
    `UPDATE docscript_documents SET lease_until = ?3 WHERE document_id = ?1 AND claim_owner = ?2
       AND ${unfinished}`,
  );
  const selectOwned = database.prepare(
    `SELECT 1 AS held FROM docscript_documents WHERE document_id = ? AND claim_owner = ? AND ${unfinished}`,
  );
  // A lapsed claim made this create's; its leftovers are deleted after, a slice at a time.
  const takeOver = database.prepare(
    `UPDATE docscript_documents SET token_hash = ?3, snapshot_version = ?4, created_at = ?5, claim_owner = ?6,
       lease_until = ?7 WHERE document_id = ?1 AND ${lapsed}`,
  );
  const deleteLeftovers = leftoverTables.map((table) =>
    database.prepare(
      `DELETE FROM ${table} WHERE rowid IN (SELECT rowid FROM ${table} WHERE document_id = ? LIMIT ${rowsPerDelete})`,
    ),
  );
  const selectLapsed = database.prepare(`SELECT document_id FROM docscript_documents WHERE ${lapsed}`);
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

  return {
    claim,
    renewClaim,
    selectOwned,
    takeOver,
    deleteLeftovers,
    selectLapsed,
    deleteClaim,
    deletePlans,
    insertSnapshot,
    insertProjection,
  };
}

export function sqliteStagedCreate(
  database: DatabaseSync,
  { writeRows, clearRows }: Pick<SqliteRowWrites, "writeRows" | "clearRows">,
  planIndex: SqlitePlanIndex,
  leaseMs = defaultClaimLeaseMs,
): SqliteStagedCreate {
  const sql = createStatements(database);

  /** Everything written under a claimed id, and the claim, in one transaction. */
  const takeBack = (documentId: string) =>
    sqliteTransaction(database, () => {
      clearRows(documentId);
      sql.deletePlans.run(documentId);
      sql.deleteClaim.run(documentId);
    });
  /**
   * Claims `documentId` for `owner`: `new`, or `taken over` from a create whose lease ran out (its
   * leftovers still to delete); false when a live claim holds the id, or a document.
   */
  const claimId = (
    { documentId, tokenHash, snapshotVersion }: Parameters<DocumentStore["createDocument"]>[0],
    owner: string,
  ): "new" | "taken over" | false =>
    sqliteTransaction(database, () => {
      const at = new Date().toISOString();
      const now = Date.now();
      const version = snapshotVersion ?? null;
      if (Number(sql.claim.run(documentId, tokenHash, version, at, owner, now + leaseMs).changes) === 1)
        return "new";
      const taken = sql.takeOver.run(documentId, now, tokenHash, version, at, owner, now + leaseMs);
      return Number(taken.changes) === 1 ? "taken over" : false;
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
    async createDocument(input) {
      const { documentId, snapshot, rows, issues, plans } = input;
      const owner = randomUUID();
      const claimed = claimId(input, owner);
      if (claimed === false) return false;
      const ownClaim = () => {
        if (Number(sql.renewClaim.run(documentId, owner, Date.now() + leaseMs).changes) !== 1)
          throw new ClaimLostError(documentId);
      };
      try {
        // What a killed create left under the id, deleted a slice at a time (30,000 rows in one
        // transaction held the loop 3 s): the rows below are then written as under a claim just made.
        if (claimed === "taken over")
          await inSlices(ownClaim, sql.deleteLeftovers.length, (table) =>
            Number(sql.deleteLeftovers[table]?.run(documentId).changes) < rowsPerDelete ? table + 1 : table,
          );
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
          if (rows !== undefined) sql.insertProjection.run(documentId, JSON.stringify(issues ?? []));
          if (plans !== undefined) planIndex.markIndexed(documentId);
          sql.insertSnapshot.run(documentId, snapshot);
        });
        return true;
      } catch (error) {
        // Not ours any more (taken back once its lease ran out): nothing of ours is left to take.
        if (database.isOpen && sql.selectOwned.get(documentId, owner) !== undefined) takeBack(documentId);
        throw error;
      }
    },
    clearUnfinished() {
      sqliteTransaction(database, () => {
        for (const row of sql.selectLapsed.all(null, Date.now()) as { document_id: string }[])
          takeBack(row.document_id);
      });
    },
  };
}
