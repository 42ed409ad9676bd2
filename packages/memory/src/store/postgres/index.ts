/** `@tackle/memory/postgres`: the PostgreSQL store (`pg` is an optional peer dependency). */
export { createPostgresStore, type PostgresStoreOptions } from "./create-postgres-store.ts";
