/** `@tackle/durable/sqlite`: the default store, one SQLite file through `node:sqlite`. */
export { createSqliteStore, type SqliteStoreOptions } from "./sqlite-store.ts";
