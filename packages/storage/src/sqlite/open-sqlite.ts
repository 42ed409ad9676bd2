/** Opening a SQLite file the one way every store does: folder created, WAL, a busy timeout, a sync level. */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { StorageError } from "../errors.ts";
import { busyTimeoutOf, execWhenFree, isSqliteBusy } from "./busy.ts";

/**
 * How hard each commit is pushed to disk. `full`: durable across power loss. `normal`: in WAL mode,
 * durable across a process crash (SIGKILL) but a power cut may lose the last commits. `off`: neither;
 * for throwaway data only. `extra`: `full` plus a sync of the directory.
 */
export type SqliteSynchronous = "off" | "normal" | "full" | "extra";

export interface OpenSqliteOptions {
  /** A file path (its folder is created 0700, a new file 0600), or `:memory:`. */
  readonly path: string;
  /** Default `full`. */
  readonly synchronous?: SqliteSynchronous;
  /**
   * How long a statement waits for another connection's lock before failing with SQLITE_BUSY.
   * Default 5000 ms. Set at open, so even the switch to WAL waits; past it the open, and a migration's
   * wait for the write lock, fail with StorageError `lock_timeout` (transient).
   */
  readonly busyTimeoutMs?: number;
}

const levels: Record<SqliteSynchronous, string> = {
  off: "OFF",
  normal: "NORMAL",
  full: "FULL",
  extra: "EXTRA",
};

export function openSqlite(options: OpenSqliteOptions): DatabaseSync {
  if (options.path === "") throw new StorageError("invalid_option", "The SQLite path is empty");
  const level = levels[options.synchronous ?? "full"];
  if (level === undefined) {
    throw new StorageError("invalid_option", `Unknown synchronous level "${String(options.synchronous)}"`);
  }
  const timeout = options.busyTimeoutMs ?? 5000;
  if (!Number.isInteger(timeout) || timeout < 0) {
    throw new StorageError("invalid_option", `busyTimeoutMs must be a non-negative integer, got ${timeout}`);
  }
  if (options.path !== ":memory:") createPrivately(options.path);
  let database: DatabaseSync | undefined;
  try {
    database = new DatabaseSync(options.path, { timeout });
    // The first statement reads the file's header: a file that is not SQLite fails here. Switching a
    // new file to WAL while another connection writes it is answered busy at once; it waits instead.
    execWhenFree(database, "PRAGMA journal_mode = WAL", timeout, `Opening the SQLite file ${options.path}`);
    database.exec(`PRAGMA synchronous = ${level}`);
  } catch (error) {
    database?.close();
    // A file locked past the busy timeout is not damaged: telling the user to move it aside would be wrong.
    if (StorageError.isInstance(error)) throw error;
    // SQLite's own message ("file is not a database") names no file; a user with several stores needs it.
    throw new StorageError(
      "unreadable_database",
      `Cannot open the SQLite file ${options.path}: ${(error as Error).message} (move it aside to start with an empty one)`,
      {},
      { cause: error },
    );
  }
  return database;
}

/**
 * A new store is its owner's alone: folders made for it are 0700 and the file is created 0600 before
 * SQLite opens it (SQLite gives its -wal and -shm files the same mode). With the umask's 0644 a store of
 * memories or runs could be read by every user of the machine. An existing file keeps its mode.
 */
function createPrivately(path: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  try {
    // An empty file is an empty SQLite database.
    writeFileSync(path, "", { flag: "wx", mode: 0o600 });
  } catch {
    // It exists (another process may have just made it), or SQLite's own open will say why not.
  }
}

/**
 * Runs `work` in one write transaction (`BEGIN IMMEDIATE`, so the write lock is taken up front and a
 * busy database waits the busy timeout instead of failing mid-transaction). Rolls back when `work`
 * throws. Inside an open transaction, `work` runs in a savepoint instead, so helpers nest.
 */
export function sqliteTransaction<T>(database: DatabaseSync, work: () => T): T {
  if (database.isTransaction) {
    const name = `tackle_${++savepoints}`;
    database.exec(`SAVEPOINT ${name}`);
    try {
      const result = work();
      database.exec(`RELEASE ${name}`);
      return result;
    } catch (error) {
      database.exec(`ROLLBACK TO ${name}; RELEASE ${name}`);
      throw error;
    }
  }
  beginImmediate(database);
  try {
    const result = work();
    database.exec("COMMIT");
    return result;
  } catch (error) {
    if (database.isTransaction) database.exec("ROLLBACK");
    throw error;
  }
}

let savepoints = 0;

/**
 * `BEGIN IMMEDIATE`, whose busy answer comes after SQLite's busy handler waited the busy timeout (no
 * read is open yet, so SQLite does wait): it is thrown as StorageError `lock_timeout`, SQLite's error
 * its cause, as an open or a migration past the same wait is.
 */
function beginImmediate(database: DatabaseSync): void {
  try {
    database.exec("BEGIN IMMEDIATE");
  } catch (error) {
    if (!isSqliteBusy(error)) throw error;
    throw new StorageError(
      "lock_timeout",
      `A write transaction: another connection held the SQLite file's lock for over ${busyTimeoutOf(database)} ms (the busy timeout); try again`,
      {},
      { cause: error },
    );
  }
}
