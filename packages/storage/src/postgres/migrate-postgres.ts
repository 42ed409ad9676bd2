/**
 * Versioned migrations on PostgreSQL: one `tackle_migrations` table per schema, a row per store and
 * version, written under an advisory lock so processes starting at once apply each migration once.
 */
import type pg from "pg";
import { StorageError } from "../errors.ts";
import { latestVersion, type MigrationStep, schemaTooNew } from "../migrations.ts";
import { isTransientDatabaseError } from "../transient-errors.ts";
import { connectUntilAborted, untilAborted } from "./until-aborted.ts";

export interface PostgresMigration extends MigrationStep {
  /** SQL (several statements allowed), or a function given the migrating connection, inside its transaction. */
  readonly up: string | ((client: pg.ClientBase) => Promise<void>);
}

export interface PostgresMigrationPlan {
  /** The store's key in `tackle_migrations` (`durable`, `memory`, `docscript`, …). */
  readonly store: string;
  readonly migrations: readonly PostgresMigration[];
  /**
   * How long to wait for another process's migration lock, in ms: an integer from 1 to 2 147 483 647
   * (PostgreSQL's `lock_timeout` reach). Default 60 000. Anything else, 0 included (PostgreSQL's
   * "wait forever"), is refused with `invalid_option` before a connection is taken.
   */
  readonly lockTimeoutMs?: number;
  /**
   * Ends the wait for a connection or for the lock: the call rejects with `aborted` at once and its
   * connection is closed (never handed back to the pool mid-wait). Aborted before the call: no
   * connection is taken. A migration already running finishes (its transaction is not cut).
   */
  readonly signal?: AbortSignal | undefined;
  /**
   * The query deadline of each migration given as SQL (a string `up`), in ms, for DDL slower than the
   * pool's `queryTimeoutMs` (an index on a big table): an integer from 1 to 2 147 483 647. A function
   * `up` passes its own on a slow query (`client.query({ text, query_timeout: ms })`). Default: the
   * pool's. The wait for the lock is given `lockTimeoutMs` on top of the pool's deadline.
   */
  readonly queryTimeoutMs?: number;
}

export interface MigrationResult {
  readonly from: number;
  readonly to: number;
}

const table = `CREATE TABLE IF NOT EXISTS tackle_migrations (
  store TEXT NOT NULL,
  version INTEGER NOT NULL,
  name TEXT NOT NULL,
  applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (store, version)
)`;
/** One lock per schema: stores sharing a schema share the bookkeeping table, so they take turns creating it. */
const lockKey = "hashtext('tackle_migrations:' || coalesce(current_schema(), ''))";

/**
 * Brings the store's tables in the connection's current schema to the newest version. Each pending
 * migration runs in its own transaction with its bookkeeping row; the advisory lock is held across
 * them, so a second process waits, then finds them applied. Refuses (`schema_too_new`) a schema
 * migrated by newer code.
 */
export async function migratePostgres(pool: pg.Pool, plan: PostgresMigrationPlan): Promise<MigrationResult> {
  const latest = latestVersion(plan.store, plan.migrations);
  const { lockTimeoutMs, queryTimeoutMs } = checkedTimeouts(plan);
  // The pool's query deadline (ADR 0574): the lock wait may take up to lockTimeoutMs on top of it.
  const poolDeadline = (pool as { options?: { query_timeout?: unknown } }).options?.query_timeout;
  // Capped at a timer's reach: past it Node fires the timer at once.
  const lockDeadline =
    typeof poolDeadline === "number" && poolDeadline > 0
      ? Math.min(poolDeadline + lockTimeoutMs, 2_147_483_647)
      : undefined;
  const signal = plan.signal;
  const aborted = () =>
    new StorageError(
      "aborted",
      `Store "${plan.store}": the migration was aborted before it began`,
      {
        store: plan.store,
      },
      { cause: signal?.reason },
    );
  const client = await connectUntilAborted(pool, signal, aborted).catch((error: unknown) => {
    throw lostOrAsIs(plan.store, error);
  });
  let broken: Error | undefined;
  let locked = false;
  /** The session left waiting for the lock by an abort: ended, since a closed socket alone does not stop its wait. */
  let abandonedSession: number | undefined;
  try {
    await client.query(`SELECT set_config('lock_timeout', $1, false)`, [`${lockTimeoutMs}ms`]);
    try {
      // Waiting for the lock is where an abort lands: the connection is destroyed, and its session
      // ended (below), so it does not stay in the lock's queue.
      const lock = { text: `SELECT pg_advisory_lock(${lockKey})`, query_timeout: lockDeadline };
      await untilAborted(client.query(lock), signal);
      locked = true;
    } catch (error) {
      if (signal?.aborted) {
        broken = new Error("aborted while waiting for the migration lock");
        abandonedSession = (client as { processID?: number }).processID;
        throw aborted();
      }
      if ((error as { code?: string }).code === "55P03") {
        // The connection is destroyed, not handed back: it carries this call's short lock_timeout, and
        // PostgreSQL may have granted the lock as the wait timed out (it then keeps the session lock
        // and still raises the timeout), which would hold every other process's migration back.
        broken = new Error("timed out waiting for the migration lock");
        throw new StorageError(
          "lock_timeout",
          `Store "${plan.store}": another process held the migration lock for over ${lockTimeoutMs} ms`,
          { store: plan.store },
          { cause: error },
        );
      }
      throw error;
    }
    await client.query("RESET lock_timeout");
    await client.query(table);
    const found = await recordedVersion(client, plan.store);
    if (found > latest) throw schemaTooNew(plan.store, found, latest, "The PostgreSQL schema");
    for (let version = found + 1; version <= latest; version += 1) {
      const migration = plan.migrations[version - 1] as PostgresMigration;
      try {
        await client.query("BEGIN");
        if (typeof migration.up === "string")
          await client.query({ text: migration.up, query_timeout: queryTimeoutMs } as pg.QueryConfig);
        else await migration.up(client);
        await client.query("INSERT INTO tackle_migrations (store, version, name) VALUES ($1, $2, $3)", [
          plan.store,
          migration.version,
          migration.name,
        ]);
        await client.query("COMMIT");
      } catch (error) {
        await client.query("ROLLBACK").catch((rollbackError: Error) => {
          broken = rollbackError;
        });
        // The session died under the migration: it may have committed (the COMMIT went out, its answer
        // was lost), so "rolled back" would be a guess. The next run finds it recorded, or applies it.
        if (broken !== undefined && isTransientDatabaseError(error)) {
          throw new StorageError(
            "connection_lost",
            `Store "${plan.store}": the connection was lost during migration ${migration.version} ("${migration.name}"), which may have committed; a retry finds it recorded or applies it: ${(error as Error).message}`,
            { store: plan.store, found: version - 1, supported: latest },
            { cause: error },
          );
        }
        throw new StorageError(
          "migration_failed",
          `Store "${plan.store}": migration ${migration.version} ("${migration.name}") failed and was rolled back; the schema stays at version ${version - 1}: ${(error as Error).message}`,
          { store: plan.store, found: version - 1, supported: latest },
          { cause: error },
        );
      }
    }
    return { from: found, to: latest };
  } catch (error) {
    if (StorageError.isInstance(error)) throw error;
    broken ??= error as Error;
    throw lostOrAsIs(plan.store, error);
  } finally {
    if (locked && broken === undefined) {
      await client.query(`SELECT pg_advisory_unlock(${lockKey})`).catch((error: Error) => {
        broken = error;
      });
    }
    // A connection in doubt is destroyed, which also releases a session lock it still holds.
    client.release(broken);
    if (abandonedSession !== undefined)
      pool.query("SELECT pg_terminate_backend($1)", [abandonedSession]).catch(() => undefined);
  }
}

/** The plan's lock wait (default 60 000 ms) and migration query deadline, refused `invalid_option` unless integers from 1 to 2^31 − 1. */
function checkedTimeouts(plan: PostgresMigrationPlan): {
  lockTimeoutMs: number;
  queryTimeoutMs: number | undefined;
} {
  const lockTimeoutMs = plan.lockTimeoutMs ?? 60_000;
  if (!Number.isInteger(lockTimeoutMs) || lockTimeoutMs < 1 || lockTimeoutMs > 2_147_483_647) {
    throw new StorageError(
      "invalid_option",
      `Store "${plan.store}": lockTimeoutMs must be an integer from 1 to 2147483647 ms, got ${lockTimeoutMs}`,
      { store: plan.store },
    );
  }
  const queryTimeoutMs = plan.queryTimeoutMs;
  if (
    queryTimeoutMs !== undefined &&
    (!Number.isInteger(queryTimeoutMs) || queryTimeoutMs < 1 || queryTimeoutMs > 2_147_483_647)
  ) {
    throw new StorageError(
      "invalid_option",
      `Store "${plan.store}": queryTimeoutMs must be an integer from 1 to 2147483647 ms, got ${queryTimeoutMs}`,
      { store: plan.store },
    );
  }
  return { lockTimeoutMs, queryTimeoutMs };
}

/**
 * A driver's error that a retry can mend (the connection lost or refused, the session ended) as
 * `connection_lost`, its cause kept; anything else as it is. No migration began, so the driver's words
 * (`connect ECONNREFUSED 127.0.0.1:5432`) are the message: the store's opener names the store and URL.
 */
function lostOrAsIs(store: string, error: unknown): unknown {
  if (StorageError.isInstance(error) || !isTransientDatabaseError(error)) return error;
  return new StorageError("connection_lost", (error as Error).message, { store }, { cause: error });
}

/** The newest version recorded for `store` in the current schema (0 when none or no table yet). */
export async function postgresSchemaVersion(client: pg.Pool | pg.ClientBase, store: string): Promise<number> {
  const exists = await client.query<{ found: string | null }>(
    "SELECT to_regclass('tackle_migrations')::text AS found",
  );
  if (exists.rows[0]?.found == null) return 0;
  return recordedVersion(client, store);
}

async function recordedVersion(client: pg.Pool | pg.ClientBase, store: string): Promise<number> {
  const result = await client.query<{ version: number | null }>(
    "SELECT max(version) AS version FROM tackle_migrations WHERE store = $1",
    [store],
  );
  return Number(result.rows[0]?.version ?? 0);
}
