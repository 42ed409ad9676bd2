/**
 * The SQLite store's container index (migration 13, ADR 0514): where each map of a stored row sits,
 * by container id, written with the row inside the caller's transaction and read by id in batches.
 */
import type { DatabaseSync } from "node:sqlite";
import type { ContainerPlace, DocumentStore, RowChange, RowRoot } from "./document-store.ts";

/** Container ids per read: one prepared statement, its list bound as JSON. */
const readChunk = 500;

export interface SqliteContainerIndex {
  /**
   * Writes a row's maps as the change gives them, inside the caller's transaction: `"kept"` on a row
   * kept writes nothing (a shift's 33,000 rows); otherwise the row's entries are forgotten and its
   * given ones (none for a deleted row or one without `containers`) written.
   */
  writeRow(documentId: string, change: RowChange, fresh?: boolean): void;
}

export function sqliteContainerIndex(database: DatabaseSync): SqliteContainerIndex {
  // By the row index, pinned: searched by the primary key's prefix instead (SQLite's plan for these
  // columns as a WITHOUT ROWID table), each row's delete read every entry of the document (26 s to
  // create a document of 20,000 rows).
  const deleteOfRow = database.prepare(
    `DELETE FROM docscript_containers INDEXED BY docscript_containers_row
       WHERE document_id = ? AND root = ? AND row_id = ?`,
  );
  // A map named again (twice in a row, or by a row written before its old one is forgotten) is
  // where it was named last: never a conflict, which an append would take for another writer's.
  const upsert = database.prepare(
    `INSERT INTO docscript_containers (document_id, container_id, root, row_id, path) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (document_id, container_id) DO UPDATE SET root = excluded.root, row_id = excluded.row_id,
       path = excluded.path`,
  );
  return {
    writeRow(documentId, change, fresh = false) {
      const containers = change.containers;
      if (containers === "kept" && change.json !== undefined) return;
      // `fresh`: the row had none (a create's rows, ADR 0560).
      if (!fresh) deleteOfRow.run(documentId, change.root, change.rowId);
      if (change.json === undefined || containers === undefined || containers === "kept") return;
      for (const [containerId, path] of containers)
        upsert.run(documentId, containerId, change.root, change.rowId, JSON.stringify(path));
    },
  };
}

/** The store's `containerPlaces`: the entries held of the ids asked, a batch of ids per read. */
export function sqliteContainerPlaces(database: DatabaseSync): Pick<DocumentStore, "containerPlaces"> {
  const select = database.prepare(
    `SELECT container_id, root, row_id, path FROM docscript_containers
     WHERE document_id = ?1 AND container_id IN (SELECT value FROM json_each(?2))`,
  );
  // Rows as arrays: no object made per entry read, of up to 40,000 at a shift of 33,000 rows.
  select.setReturnArrays(true);
  return {
    async containerPlaces(documentId, containerIds) {
      const places = new Map<string, ContainerPlace>();
      for (let start = 0; start < containerIds.length; start += readChunk) {
        const ids = JSON.stringify(containerIds.slice(start, start + readChunk));
        const rows = select.all(documentId, ids) as unknown as [string, RowRoot, string, string][];
        for (const [containerId, root, rowId, path] of rows)
          places.set(containerId, { root, rowId, path: JSON.parse(path) });
      }
      return places;
    },
  };
}
