/**
 * Which database errors a retry can mend: the connection was lost or refused (the server restarting,
 * failing over, a network blip), the server shut the session down, or it chose this transaction as a
 * deadlock or serialization victim. Anything else (a constraint, bad SQL, a timeout the caller set)
 * fails the same way again and is not transient.
 */

import { StorageError, type StorageErrorCode } from "./errors.ts";

/** This package's own refusals that a retry can mend. */
const transientCodes = new Set<StorageErrorCode>(["lock_timeout", "connection_lost", "query_timeout"]);

/** PostgreSQL SQLSTATEs (and classes) a retry can mend. */
const transientSqlStates = new Set([
  "40001", // serialization_failure
  "40P01", // deadlock_detected
  "53300", // too_many_connections
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now (starting up, in recovery)
]);

/** Socket errors of a connection lost or refused. */
const transientErrnos = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ECONNABORTED",
]);

/**
 * Messages `pg` throws without a code when the connection dies under a query, or before one gets a
 * connection (its pool's connect timeout).
 */
const transientMessages = [
  /^Connection terminated/,
  /^Client has encountered a connection error and is not queryable/,
  /^timeout exceeded when trying to connect/,
  /^Connection terminated due to connection timeout/,
  // pg's own query deadline (`query_timeout`) on a pool this package did not open.
  /^Query read timeout/,
];

/** SQLite result codes (`errcode` on `node:sqlite` errors): SQLITE_BUSY, SQLITE_LOCKED and their extended codes. */
const sqliteBusy = new Set([5, 6]);

/**
 * True when `error` (or an error in its `cause` chain, or in an `AggregateError`'s list) is one a retry
 * can mend: a lost or refused database connection, a server shutting sessions down, a deadlock or
 * serialization failure, SQLite busy or locked, a query past its deadline, or a `StorageError`
 * `lock_timeout`, `connection_lost` or `query_timeout` (on either engine).
 */
export function isTransientDatabaseError(error: unknown): boolean {
  const seen = new Set<unknown>();
  const pending: unknown[] = [error];
  while (pending.length > 0 && seen.size < 16) {
    const current = pending.pop();
    if (typeof current !== "object" || current === null || seen.has(current)) continue;
    seen.add(current);
    const { code, errcode, message, cause, errors } = current as {
      code?: unknown;
      errcode?: unknown;
      message?: unknown;
      cause?: unknown;
      errors?: unknown;
    };
    if (StorageError.isInstance(current) && transientCodes.has(current.code)) return true;
    if (typeof code === "string") {
      // Class 08 is connection exceptions, all but a protocol violation (a bug, not the network).
      const connectionLost = code.startsWith("08") && code !== "08P01";
      if (transientSqlStates.has(code) || connectionLost || transientErrnos.has(code)) return true;
    }
    if (typeof errcode === "number" && sqliteBusy.has(errcode & 0xff)) return true;
    if (typeof message === "string" && transientMessages.some((pattern) => pattern.test(message)))
      return true;
    pending.push(cause);
    if (Array.isArray(errors)) pending.push(...errors);
  }
  return false;
}
