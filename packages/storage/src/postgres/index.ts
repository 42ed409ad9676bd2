/** `@tackle/storage/postgres`: the pool policy, transactions and migrations on PostgreSQL (needs `pg`). */
export {
  createPostgresPool,
  openPostgres,
  type PostgresHandle,
  type PostgresHandleOptions,
  type PostgresPoolOptions,
  postgresTransaction,
} from "./create-pool.ts";
export {
  type MigrationResult,
  migratePostgres,
  type PostgresMigration,
  type PostgresMigrationPlan,
  postgresSchemaVersion,
} from "./migrate-postgres.ts";
