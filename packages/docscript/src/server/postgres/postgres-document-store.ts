/** The scale-out document store: PostgreSQL through `pg`, the same update log and snapshots as SQLite. */
import { migratePostgres, openPostgres } from "@tackle/storage/postgres";
import type pg from "pg";
import type { DocumentStore } from "../document-store.ts";
import { postgresMigrations } from "../migrations.ts";
import { postgresContainerPlaces } from "./postgres-container-index.ts";
import { documentLocks } from "./postgres-document-locks.ts";
import { postgresDocumentReads } from "./postgres-document-reads.ts";
import { postgresDocumentWrites } from "./postgres-document-writes.ts";
import { postgresPlanIndex } from "./postgres-plan-index.ts";
import { postgresRowReads } from "./postgres-row-reads.ts";

export interface PostgresDocumentStoreOptions {
  /** A connection string, or a pool the caller owns (then `close()` leaves it open). */
  readonly connectionString?: string;
  readonly pool?: pg.Pool;
  /** Pool size when the store opens the pool (default 4). */
  readonly maxConnections?: number;
  /**
   * Documents one server can push to at the same moment: each push holds a connection of a separate
   * pool for its document's advisory lock (default 8; more wait for a lock connection).
   */
  readonly maxDocumentLocks?: number;
  /** How long a push waits for another server's push to the same document (default 30 000 ms). */
  readonly lockTimeoutMs?: number;
  /** Told when an idle pooled connection fails (the server restarted or ended it); default: a warning. */
  readonly onError?: (error: Error) => void;
}

export async function createPostgresDocumentStore(
  options: PostgresDocumentStoreOptions,
): Promise<DocumentStore> {
  // One pool policy: idle-connection losses go to onError (default: a process warning), never a crash.
  const handle = openPostgres({
    pool: options.pool,
    connectionString: options.connectionString,
    max: options.maxConnections ?? 4,
    label: "docscript",
    ...(options.onError === undefined ? {} : { onError: options.onError }),
  });
  const pool = handle.pool;
  try {
    // Two servers starting at once take turns under the migration lock; a newer schema is refused.
    await migratePostgres(pool, { store: "docscript", migrations: postgresMigrations });
  } catch (error) {
    await handle.close();
    throw error;
  }
  // Document locks on their own connections, so a push waiting for another server never starves the
  // queries of the pool above; the session lock dies with its connection if this process does.
  const locks =
    options.connectionString === undefined
      ? { pool, close: async () => {} }
      : openPostgres({
          connectionString: options.connectionString,
          max: options.maxDocumentLocks ?? 8,
          connectionTimeoutMs: options.lockTimeoutMs ?? 30_000,
          label: "docscript locks",
          ...(options.onError === undefined ? {} : { onError: options.onError }),
        });
  const coordination = documentLocks({
    pool,
    connectionString: options.connectionString,
    locks,
    lockTimeoutMs: options.lockTimeoutMs ?? 30_000,
    onError: options.onError,
  });
  return {
    ...postgresDocumentReads(pool),
    ...postgresRowReads(pool),
    ...postgresDocumentWrites(pool),
    ...postgresPlanIndex(pool),
    ...postgresContainerPlaces(pool),
    lockDocument: coordination.lockDocument,
    watchAppends: coordination.watchAppends,
    async close() {
      await coordination.stopWatches();
      await handle.close();
      await locks.close();
    },
  };
}
