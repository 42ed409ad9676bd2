/**
 * One PostgreSQL pool policy for every store: a size, a deadline on every wait (connect, query, a
 * transaction left idle), TCP keep-alive, and one way to report losses.
 */
import pg from "pg";
import { StorageError } from "../errors.ts";
import { guardQueryDeadline } from "./query-deadline.ts";
import { connectUntilAborted, untilAborted } from "./until-aborted.ts";

export interface PostgresPoolOptions {
  /** `postgres://user:password@host:port/database`. */
  readonly connectionString: string;
  /** Most connections open at once. Default 10. */
  readonly max?: number;
  /** How long a query waits for a free connection or a new one before failing. Default 10 000 ms. */
  readonly connectionTimeoutMs?: number;
  /** Idle connections are closed after this long. Default 30 000 ms. */
  readonly idleTimeoutMs?: number;
  /**
   * How long a query waits for PostgreSQL's answer before failing with `StorageError` `query_timeout`
   * (transient); its connection is destroyed, never handed back. Bounds a query on a network that
   * silently stopped delivering. A query that needs longer passes its own: `client.query({ text,
   * values, query_timeout: ms })`. An integer from 1 to 2 147 483 647. Default 60 000 ms.
   */
  readonly queryTimeoutMs?: number;
  /**
   * The server ends a session left idle inside a transaction this long (PostgreSQL's
   * `idle_in_transaction_session_timeout`), freeing the locks of a client that vanished mid-transaction.
   * An integer from 1 to 2 147 483 647, or 0 to send nothing: it goes in the connection's startup
   * packet, which PgBouncer refuses (`unsupported startup parameter`) unless its
   * `ignore_startup_parameters` lists it. Default 60 000 ms.
   */
  readonly idleInTransactionTimeoutMs?: number;
  /**
   * TCP keep-alive is on for every connection; its first probe goes after this much silence, so the
   * operating system finds an idle connection whose peer vanished. An integer from 1 to 2 147 483 647.
   * Default 10 000 ms.
   */
  readonly keepAliveInitialDelayMs?: number;
  /** Who owns the pool, for the warning (`durable`, `memory`, …). */
  readonly label: string;
  /**
   * Told when an idle pooled connection fails (the server restarted or ended it). The pool drops it
   * and opens a new one on the next query; queries in flight fail on their own, and a checked-out
   * connection that fails between queries is dropped when it is released (never ends the process). Default: a process
   * warning naming the label. Without a listener Node would crash the process.
   */
  readonly onError?: (error: Error) => void;
}

export function createPostgresPool(options: PostgresPoolOptions): pg.Pool {
  const max = options.max ?? 10;
  if (!Number.isInteger(max) || max < 1) {
    throw new StorageError("invalid_option", `Pool size must be a positive integer, got ${max}`);
  }
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max,
    connectionTimeoutMillis: options.connectionTimeoutMs ?? 10_000,
    idleTimeoutMillis: options.idleTimeoutMs ?? 30_000,
    query_timeout: milliseconds(options, "queryTimeoutMs", 60_000),
    // 0: not sent (pg sends only a truthy value), for a pooler that refuses it.
    idle_in_transaction_session_timeout: milliseconds(options, "idleInTransactionTimeoutMs", 60_000, true),
    keepAlive: true,
    keepAliveInitialDelayMillis: milliseconds(options, "keepAliveInitialDelayMs", 10_000),
  });
  // A query past its deadline leaves pg's connection waiting for ever: destroyed instead (ADR 0574).
  pool.on("connect", (client) => guardQueryDeadline(client, options.label, pool));
  // A connection that fails while checked out (a transaction's, a held lock's) emits "error" on its
  // client, and pg-pool listens only while the client is idle: without this listener a server restart
  // during any transaction ends the process. The query in flight fails on its own; a client that
  // failed is not queryable, and the pool drops it on release.
  pool.on("connect", (client) => {
    client.on("error", () => undefined);
  });
  pool.on(
    "error",
    options.onError ??
      ((error) =>
        process.emitWarning(`${options.label}: idle PostgreSQL connection lost: ${error.message}`, {
          code: "TACKLE_POSTGRES_CONNECTION_LOST",
        })),
  );
  return pool;
}

/**
 * Where a pool's caller gives no deadline (a module's store opened from a URL by `tackle serve`), an
 * operator sets one for every pool of the process: a migration's slow DDL, a PgBouncer in front.
 */
const environmentDefaults = {
  queryTimeoutMs: "TACKLE_PG_QUERY_TIMEOUT_MS",
  idleInTransactionTimeoutMs: "TACKLE_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS",
} as const;

/**
 * `options[name]`, else its environment default, else `fallback`, refused with `invalid_option` unless
 * an integer from 1 (0 where `zero` allows it) to 2^31 − 1.
 */
function milliseconds(
  options: PostgresPoolOptions,
  name: "queryTimeoutMs" | "idleInTransactionTimeoutMs" | "keepAliveInitialDelayMs",
  fallback: number,
  zero = false,
): number {
  const variable =
    name in environmentDefaults ? environmentDefaults[name as keyof typeof environmentDefaults] : "";
  const fromEnvironment = variable === "" ? undefined : process.env[variable]?.trim() || undefined;
  const value = options[name] ?? (fromEnvironment === undefined ? fallback : Number(fromEnvironment));
  if (!Number.isInteger(value) || value < (zero ? 0 : 1) || value > 2_147_483_647) {
    const given = options[name] === undefined && fromEnvironment !== undefined ? variable : name;
    throw new StorageError(
      "invalid_option",
      `${options.label}: ${given} must be an integer from ${zero ? 0 : 1} to 2147483647 ms, got ${options[name] ?? fromEnvironment}`,
    );
  }
  return value;
}

export interface PostgresHandleOptions extends Omit<PostgresPoolOptions, "connectionString"> {
  /** A pool the caller owns (left open by `close()`), or … */
  readonly pool?: pg.Pool | undefined;
  /** … a connection string (the handle opens the pool and `close()` ends it). */
  readonly connectionString?: string | undefined;
}

export interface PostgresHandle {
  readonly pool: pg.Pool;
  /** Ends the pool when this handle opened it; leaves a caller's pool open. */
  close(): Promise<void>;
}

/** The pool a store should use: the caller's, or a new one under the common policy. */
export function openPostgres(options: PostgresHandleOptions): PostgresHandle {
  if (options.pool !== undefined) {
    const pool = options.pool;
    return { pool, close: async () => {} };
  }
  if (options.connectionString === undefined || options.connectionString === "") {
    throw new StorageError(
      "invalid_option",
      `${options.label}: give a PostgreSQL connection string or a pool`,
    );
  }
  const pool = createPostgresPool({ ...options, connectionString: options.connectionString });
  let ended = false;
  return {
    pool,
    async close() {
      if (ended) return;
      ended = true;
      await pool.end();
    },
  };
}

/**
 * Runs `work` in one transaction on one pooled connection: COMMIT when it resolves, ROLLBACK when it
 * throws. A connection whose ROLLBACK fails is destroyed rather than handed to the next caller.
 * `signal` ends the wait for a connection or for `work` at once with `aborted`: the connection is
 * destroyed and its session ended, so the transaction rolls back and its locks go; aborted before the
 * call, no connection is taken. Once `work` has resolved, the COMMIT is not cut, and its failure is
 * thrown as the driver's error, never `aborted`: a COMMIT whose answer was lost (the connection failed
 * as it came back) may have committed, so such a transient error leaves the outcome unknown and a
 * retry must be safe to repeat (an idempotency key, `ON CONFLICT DO NOTHING`).
 */
export async function postgresTransaction<T>(
  pool: pg.Pool,
  work: (client: pg.PoolClient) => Promise<T>,
  options: { readonly signal?: AbortSignal | undefined } = {},
): Promise<T> {
  const signal = options.signal;
  const aborted = () =>
    new StorageError("aborted", "The transaction was aborted and rolled back", {}, { cause: signal?.reason });
  const client = await connectUntilAborted(pool, signal, aborted);
  let broken: Error | undefined;
  /** The session of a transaction cut by an abort: ended, since a closed socket alone does not stop its statement. */
  let abandonedSession: number | undefined;
  /** Set once COMMIT is sent: from then on a failure is not an abort's, and the outcome may be a commit. */
  let committing = false;
  try {
    await untilAborted(client.query("BEGIN"), signal);
    const result = await untilAborted(work(client), signal);
    committing = true;
    await client.query("COMMIT");
    return result;
  } catch (error) {
    if (signal?.aborted && !committing) {
      broken = new Error("aborted");
      abandonedSession = (client as { processID?: number }).processID;
      throw aborted();
    }
    await client.query("ROLLBACK").catch((rollbackError: Error) => {
      broken = rollbackError;
    });
    throw error;
  } finally {
    client.release(broken);
    if (abandonedSession !== undefined)
      pool.query("SELECT pg_terminate_backend($1)", [abandonedSession]).catch(() => undefined);
  }
}
