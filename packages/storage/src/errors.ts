/** The storage layer's one error type: a code a caller can branch on, and the facts behind it. */

export type StorageErrorCode =
  /** The database was migrated by newer code than this; opening it could corrupt what the newer code wrote. */
  | "schema_too_new"
  /** The SQLite file belongs to another store (its application id says so). */
  | "foreign_database"
  /** A store's migration list is malformed (versions not 1, 2, 3, … in order). */
  | "invalid_migrations"
  /** A migration failed; it was rolled back and the database is still at `from`. */
  | "migration_failed"
  /**
   * The migration lock was not granted in time (another process holds it); on SQLite, the file's lock
   * within the busy timeout, at open or for a migration. Transient: a retry can succeed.
   */
  | "lock_timeout"
  /**
   * The connection to PostgreSQL was lost or refused, or the server ended the session, during a
   * migration call (a restart, a network fault). Transient: a retry can succeed. A migration whose
   * COMMIT was sent may have committed all the same; the next run finds it recorded and skips it.
   */
  | "connection_lost"
  /**
   * PostgreSQL did not answer a query within its deadline (the pool's `queryTimeoutMs`, or the query's
   * own `query_timeout`): a network that stopped delivering, or a statement slower than the deadline.
   * The connection was destroyed, never handed back to the pool; the statement may have run (a COMMIT
   * may have committed). Transient: a retry on a new connection can succeed.
   */
  | "query_timeout"
  /** The caller's abort signal ended a wait: a migration's for a connection or the lock (nothing migrated), a transaction's (rolled back). */
  | "aborted"
  /** A bad option (an empty path, a pool size below 1, an unknown synchronous level). */
  | "invalid_option"
  /** The SQLite file cannot be opened (not a database, damaged, unreadable); the message names the file. */
  | "unreadable_database";

export interface StorageErrorDetails {
  readonly store?: string;
  /** The schema version found in the database. */
  readonly found?: number;
  /** The newest version this code knows. */
  readonly supported?: number;
}

const brand = Symbol.for("@tackle/storage/StorageError");

export class StorageError extends Error {
  override readonly name = "StorageError";
  readonly code: StorageErrorCode;
  readonly details: StorageErrorDetails;
  readonly [brand] = true;

  constructor(
    code: StorageErrorCode,
    message: string,
    details: StorageErrorDetails = {},
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.code = code;
    this.details = details;
  }

  /** True for a `StorageError` from any copy of this package. */
  static isInstance(value: unknown): value is StorageError {
    return typeof value === "object" && value !== null && (value as { [brand]?: unknown })[brand] === true;
  }
}
