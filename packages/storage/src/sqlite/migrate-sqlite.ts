/** Versioned migrations on SQLite: the version is the file's `PRAGMA user_version`. */
import type { DatabaseSync } from "node:sqlite";
import { StorageError } from "../errors.ts";
import { latestVersion, type MigrationStep, schemaTooNew } from "../migrations.ts";
import { busyTimeoutOf, execWhenFree } from "./busy.ts";
import { type OpenSqliteOptions, openSqlite } from "./open-sqlite.ts";

export interface SqliteMigration extends MigrationStep {
  /** SQL run with `exec` (several statements allowed), or a function for what SQL alone cannot say. */
  readonly up: string | ((database: DatabaseSync) => void);
}

export interface SqliteMigrationPlan {
  /** The store's name; its hash becomes the file's `application_id`, so another store's file is refused. */
  readonly store: string;
  readonly migrations: readonly SqliteMigration[];
}

export interface MigrationResult {
  /** The version found when the database was opened (0: none recorded). */
  readonly from: number;
  /** The version now. */
  readonly to: number;
}

/**
 * Brings the file to the newest version: each pending migration in its own `BEGIN IMMEDIATE`
 * transaction together with its `user_version` bump, so a crash leaves the file at a whole version
 * and two processes opening it at once apply each migration once. Refuses (`schema_too_new`) a file
 * whose version is newer than the list, and (`foreign_database`) a file stamped by another store.
 * Another connection holding the write lock past the busy timeout fails it with `lock_timeout`
 * (transient; the migrations committed before stay).
 */
export function migrateSqlite(database: DatabaseSync, plan: SqliteMigrationPlan): MigrationResult {
  const latest = latestVersion(plan.store, plan.migrations);
  const applicationId = storeApplicationId(plan.store);
  const busyTimeoutMs = busyTimeoutOf(database);
  let from: number | undefined;
  for (;;) {
    execWhenFree(database, "BEGIN IMMEDIATE", busyTimeoutMs, `Store "${plan.store}": migrating`, {
      store: plan.store,
      supported: latest,
    });
    let version: number;
    try {
      version = pragma(database, "user_version");
      from ??= version;
      const stamped = pragma(database, "application_id");
      if (stamped !== 0 && stamped !== applicationId) {
        throw new StorageError(
          "foreign_database",
          `The SQLite file belongs to another store (application_id ${stamped}), not "${plan.store}"`,
          { store: plan.store, found: version },
        );
      }
      if (version > latest) throw schemaTooNew(plan.store, version, latest, "The SQLite file");
      if (version === latest) {
        database.exec("COMMIT");
        return { from, to: version };
      }
    } catch (error) {
      database.exec("ROLLBACK");
      throw error;
    }
    const migration = plan.migrations[version] as SqliteMigration;
    try {
      if (typeof migration.up === "string") database.exec(migration.up);
      else migration.up(database);
      database.exec(`PRAGMA user_version = ${migration.version}; PRAGMA application_id = ${applicationId};`);
      database.exec("COMMIT");
    } catch (error) {
      if (database.isTransaction) database.exec("ROLLBACK");
      throw new StorageError(
        "migration_failed",
        `Store "${plan.store}": migration ${migration.version} ("${migration.name}") failed and was rolled back; the file stays at version ${version}: ${(error as Error).message}`,
        { store: plan.store, found: version, supported: latest },
        { cause: error },
      );
    }
  }
}

/** The version recorded in the file (0 when none). */
export function sqliteSchemaVersion(database: DatabaseSync): number {
  return pragma(database, "user_version");
}

function pragma(database: DatabaseSync, name: "user_version" | "application_id"): number {
  const row = database.prepare(`PRAGMA ${name}`).get() as Record<string, number> | undefined;
  return Number(row?.[name] ?? 0);
}

/** FNV-1a of the store name as a signed 32-bit integer, never 0 (0 means "unstamped"). */
export function storeApplicationId(store: string): number {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(`tackle:${store}`)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193);
  }
  return hash | 0 || 1;
}

/** `openSqlite` then `migrateSqlite`; the file is closed again when the migration refuses or fails. */
export function openMigratedSqlite(options: OpenSqliteOptions & SqliteMigrationPlan): DatabaseSync {
  const database = openSqlite(options);
  try {
    migrateSqlite(database, options);
    return database;
  } catch (error) {
    database.close();
    throw error;
  }
}
