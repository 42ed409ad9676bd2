/**
 * Waiting for another connection's lock on a SQLite file, to the end of the busy timeout. SQLite's own
 * busy handler waits for most locks, but answers SQLITE_BUSY at once where waiting could deadlock: a
 * connection that has read the file and now needs to write it while another holds the write lock. The
 * switch of a new file to WAL is such a case, so processes opening one new file at once failed in
 * 0–12 ms with a 5 s timeout (ADR 0565).
 */
import type { DatabaseSync } from "node:sqlite";
import { StorageError, type StorageErrorDetails } from "../errors.ts";

/** SQLITE_BUSY, with any extended code (`node:sqlite` puts the extended code in `errcode`). */
export function isSqliteBusy(error: unknown): boolean {
  const errcode = (error as { errcode?: unknown } | undefined)?.errcode;
  return typeof errcode === "number" && (errcode & 0xff) === 5;
}

const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * Runs `sql`, and again after a short pause (1, 2, 4, … up to 25 ms) while SQLite answers busy, until
 * `timeoutMs` has passed since the first try (SQLite's own wait counts toward it). Then throws
 * StorageError `lock_timeout` with SQLite's busy error as its cause, so `isTransientDatabaseError` holds.
 */
export function execWhenFree(
  database: DatabaseSync,
  sql: string,
  timeoutMs: number,
  what: string,
  details: StorageErrorDetails = {},
): void {
  const started = performance.now();
  for (let attempt = 0; ; attempt++) {
    try {
      database.exec(sql);
      return;
    } catch (error) {
      if (!isSqliteBusy(error)) throw error;
      const waited = performance.now() - started;
      if (waited >= timeoutMs) {
        throw new StorageError(
          "lock_timeout",
          `${what}: another connection held the SQLite file's lock for over ${timeoutMs} ms (the busy timeout); try again`,
          details,
          { cause: error },
        );
      }
      Atomics.wait(pause, 0, 0, Math.min(2 ** attempt, 25, Math.ceil(timeoutMs - waited)));
    }
  }
}

/** The connection's busy timeout in ms (`PRAGMA busy_timeout`). */
export function busyTimeoutOf(database: DatabaseSync): number {
  const row = database.prepare("PRAGMA busy_timeout").get() as { timeout?: number } | undefined;
  return Number(row?.timeout ?? 0);
}
