/** `@tackle/durable/postgres`: runs, journals and frames in PostgreSQL through `pg`. */
export { createPostgresStore, type PostgresStoreOptions } from "./postgres-store.ts";
