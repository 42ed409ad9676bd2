/** The store a docscript bench opens: a SQLite file, or the PostgreSQL database a `postgres://` URL names. */
import type { DocumentStore } from "../../packages/docscript/src/server/document-store.ts";
import { createSqliteDocumentStore } from "../../packages/docscript/src/server/index.ts";
import { createPostgresDocumentStore } from "../../packages/docscript/src/server/postgres/index.ts";

export async function openBenchStore(target: string): Promise<DocumentStore> {
  return target.startsWith("postgres://")
    ? await createPostgresDocumentStore({ connectionString: target })
    : createSqliteDocumentStore({ path: target });
}
