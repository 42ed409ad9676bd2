/**
 * The PostgreSQL store's container index (migration 12, ADR 0514): where each map of a stored row
 * sits, by container id, written with the rows inside the caller's transaction (a few statements
 * however many rows, arrays as parameters) and read by id in batches.
 */
import { postgresDialect as sql } from "@tackle/storage";
import type pg from "pg";
import type { ContainerPlace, DocumentStore, RowChange, RowRoot } from "../document-store.ts";

/** Entries per insert, as the row writes chunk theirs. */
const writeChunk = 5000;
/**
 * Container ids per read: few statements, since PostgreSQL plans an id list element by element and
 * each statement pays its own plan (40,000 ids read in chunks of 500 took two to three times as long
 * as in one; the planner chose a scan of the document for each chunk of a small table).
 */
const readChunk = 20_000;

/**
 * Writes the rows' maps as the changes give them: rows `"kept"` (and not deleted) are left alone, with
 * no statement when all are (a shift's 33,000 rows); every other row's entries are forgotten and its
 * given ones (none for a deleted row or one without `containers`) written.
 */
export async function writeContainers(
  client: pg.PoolClient,
  documentId: string,
  rows: readonly RowChange[],
): Promise<void> {
  const written = rows.filter((change) => change.containers !== "kept" || change.json === undefined);
  if (written.length === 0) return;
  for (const root of ["entities", "relations"] as const) {
    const ids = written.filter((change) => change.root === root).map((change) => change.rowId);
    if (ids.length > 0)
      await client.query(
        `DELETE FROM docscript_containers WHERE document_id = $1 AND root = $2 AND ${sql.anyOf("row_id", 3)}`,
        [documentId, root, sql.list(ids)],
      );
  }
  // One entry per map, where it was named last (as SQLite's writes one row after another leave it):
  // one statement may not update a row twice.
  const entries = new Map<string, { root: RowRoot; rowId: string; path: string }>();
  for (const change of written) {
    const containers = change.containers;
    if (change.json === undefined || containers === undefined || containers === "kept") continue;
    for (const [containerId, path] of containers)
      entries.set(containerId, { root: change.root, rowId: change.rowId, path: JSON.stringify(path) });
  }
  const all = [...entries];
  for (let start = 0; start < all.length; start += writeChunk) {
    const chunk = all.slice(start, start + writeChunk);
    // A map a row not written here still holds (it cannot move, so a stale entry) goes to this row.
    await client.query(
      `INSERT INTO docscript_containers (document_id, container_id, root, row_id, path)
       SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[])
       ON CONFLICT (document_id, container_id) DO UPDATE SET root = excluded.root, row_id = excluded.row_id,
         path = excluded.path`,
      [
        documentId,
        chunk.map(([containerId]) => containerId),
        chunk.map(([, entry]) => entry.root),
        chunk.map(([, entry]) => entry.rowId),
        chunk.map(([, entry]) => entry.path),
      ],
    );
  }
}

/** The store's `containerPlaces`: the entries held of the ids asked, a batch of ids per read. */
export function postgresContainerPlaces(pool: pg.Pool): Pick<DocumentStore, "containerPlaces"> {
  return {
    async containerPlaces(documentId, containerIds) {
      const places = new Map<string, ContainerPlace>();
      for (let start = 0; start < containerIds.length; start += readChunk) {
        const found = await pool.query<{ container_id: string; root: RowRoot; row_id: string; path: string }>(
          `SELECT container_id, root, row_id, path FROM docscript_containers
           WHERE document_id = $1 AND ${sql.anyOf("container_id", 2)}`,
          [documentId, sql.list(containerIds.slice(start, start + readChunk))],
        );
        for (const row of found.rows)
          places.set(row.container_id, { root: row.root, rowId: row.row_id, path: JSON.parse(row.path) });
      }
      return places;
    },
  };
}
