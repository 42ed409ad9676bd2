/** @tackle/docscript/postgres: the PostgreSQL document store (needs the optional peer `pg`). */
export { createPostgresDocumentStore, type PostgresDocumentStoreOptions } from "./postgres-document-store.ts";
