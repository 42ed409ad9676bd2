/**
 * What Tackle's SQL differs in between SQLite and PostgreSQL, written once (ADR 0008): numbered
 * parameters, "one of a list", "starts with", the database's clock in ISO form, and table-prefix
 * checks. Each store keeps its own statements (PostgreSQL's stores lean on one-statement CTEs that
 * SQLite has no use for); only these fragments are shared, so the two dialects cannot drift apart.
 */
import { StorageError } from "./errors.ts";

export type SqlDialectName = "sqlite" | "postgres";

/** A list element's SQL type, for PostgreSQL's array cast (SQLite binds every list as JSON text). */
export type SqlListType = "text" | "bigint" | "int";

export interface SqlDialect {
  readonly name: SqlDialectName;
  /** The `n`-th (1-based) bound parameter: `?n` in SQLite, `$n` in PostgreSQL. */
  param(n: number): string;
  /**
   * `column` is one of the list bound at parameter `n` (bind the value of `list`). An empty list
   * matches nothing. PostgreSQL: `column = ANY($n::text[])`; SQLite: an `IN` over `json_each(?n)`, so
   * one prepared statement serves every list length.
   */
  anyOf(column: string, n: number, type?: SqlListType): string;
  /** The value to bind for `anyOf`: the array itself in PostgreSQL, its JSON text in SQLite. */
  list(values: readonly (string | number)[]): unknown;
  /** `column` starts with the text bound at parameter `n` (no `LIKE`: `%` and `_` in it are literal). */
  startsWith(column: string, n: number): string;
  /**
   * Now by the database's clock as ISO-8601 UTC text with milliseconds (`2026-01-02T03:04:05.678Z`),
   * the form Tackle's stores keep times in, so text order is time order.
   */
  readonly nowIso: string;
}

export const sqliteDialect: SqlDialect = {
  name: "sqlite",
  param: (n) => `?${positive(n)}`,
  anyOf: (column, n) => `${column} IN (SELECT value FROM json_each(?${positive(n)}))`,
  list: (values) => JSON.stringify(values),
  startsWith: (column, n) => `substr(${column}, 1, length(?${positive(n)})) = ?${n}`,
  nowIso: `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`,
};

export const postgresDialect: SqlDialect = {
  name: "postgres",
  param: (n) => `$${positive(n)}`,
  anyOf: (column, n, type = "text") => `${column} = ANY($${positive(n)}::${type}[])`,
  list: (values) => [...values],
  startsWith: (column, n) => `left(${column}, length($${positive(n)})) = $${n}`,
  nowIso: `to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`,
};

function positive(n: number): number {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`SQL parameters are numbered from 1, not ${n}`);
  return n;
}

/**
 * A table-name prefix a store may splice into its SQL: a plain lower-case identifier of at most 31
 * characters (PostgreSQL keeps 63 per name, and the longest suffix a store adds is under 32).
 * Anything else is refused with StorageError `invalid_option`, before any SQL is written with it.
 */
export function checkTablePrefix(prefix: string, store: string): string {
  if (!/^[a-z_][a-z0-9_]{0,30}$/.test(prefix)) {
    throw new StorageError(
      "invalid_option",
      `${store}: the table prefix "${prefix}" is not a plain lower-case identifier (a-z, 0-9, _; at most 31 characters, not starting with a digit)`,
      { store },
    );
  }
  return prefix;
}
