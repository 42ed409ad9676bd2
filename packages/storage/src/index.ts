/**
 * `@tackle/storage`: how Tackle's stores open SQLite (and, from `@tackle/storage/postgres`,
 * PostgreSQL), run transactions and migrate their schemas by numbered versions.
 */
export { StorageError, type StorageErrorCode, type StorageErrorDetails } from "./errors.ts";
export type { MigrationStep } from "./migrations.ts";
export {
  checkTablePrefix,
  postgresDialect,
  type SqlDialect,
  type SqlDialectName,
  type SqlListType,
  sqliteDialect,
} from "./sql-dialect.ts";
export {
  type MigrationResult,
  migrateSqlite,
  openMigratedSqlite,
  type SqliteMigration,
  type SqliteMigrationPlan,
  sqliteSchemaVersion,
} from "./sqlite/migrate-sqlite.ts";
export {
  type OpenSqliteOptions,
  openSqlite,
  type SqliteSynchronous,
  sqliteTransaction,
} from "./sqlite/open-sqlite.ts";
export { isTransientDatabaseError } from "./transient-errors.ts";
