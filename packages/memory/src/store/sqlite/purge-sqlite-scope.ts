/**
 * `purgeSqliteScope`: hard deletion of a scope on SQLite, down to the file's bytes. Deleted cells
 * are zeroed (`secure_delete`), the full-text indexes drop the terms instead of leaving tombstones
 * over them (FTS5 `secure-delete`), and once the deletion commits the file is vacuumed and the
 * write-ahead log that still holds the old pages is checkpointed and truncated (ADR 0365).
 */
import type { DatabaseSync, SQLInputValue } from "node:sqlite";
import { sqliteDialect, sqliteTransaction } from "@tackle/storage";
import { MEMORY_SCOPE_VALUES, type MemoryScope } from "../../scope/memory-scope.ts";
import type { PurgeCounts } from "../memory-store.ts";
import { fillUsageSql, type MetadataTable } from "../tenant-usage.ts";

const columns = { userId: "user_id", agentId: "agent_id", sessionId: "session_id" } as const;

export function purgeSqliteScope(database: DatabaseSync, tenantId: string, scope: MemoryScope): PurgeCounts {
  const fields = MEMORY_SCOPE_VALUES.filter((field) => scope[field] !== undefined);
  if (fields.length === 0) throw new Error("purgeScope needs at least one scope field");
  const values = fields.map((field) => scope[field] as string);
  // Every statement binds the same numbered parameters (the dialect's `param`): the tenant at 1, the
  // scope's values after it, and for idempotency records the fragments their answers name after those.
  const parameters = [tenantId, ...values];
  const fragments = fields.map((field, index) => `"${field}":${JSON.stringify(values[index])}`);
  const tenant = sqliteDialect.param(1);
  const value = (index: number) => sqliteDialect.param(index + 2);
  /** `tenant_id = ?1 AND user_id = ?2 …` over a table with the scope columns. */
  const scoped = [
    `tenant_id = ${tenant}`,
    ...fields.map((field, index) => `${columns[field]} = ${value(index)}`),
  ].join(" AND ");
  const run = (sql: string, bound: readonly unknown[] = parameters) =>
    Number(database.prepare(sql).run(...(bound as SQLInputValue[])).changes);
  const memoryIds = `SELECT id FROM memory_memories WHERE ${scoped}`;
  const documentIds = `SELECT id FROM memory_documents WHERE ${scoped}`;
  // A core block's scope lives only in its scope key, the JSON array of the three fields in order.
  const blockScope = fields
    .map(
      (field, index) =>
        `json_extract(scope_key, '$[${MEMORY_SCOPE_VALUES.indexOf(field)}]') = ${value(index)}`,
    )
    .join(" AND ");
  // An idempotency record names its write's scope; one kept before it did is matched by its answer,
  // which names the scope's fields as the records it wrote do.
  const answerNames = fields
    .map((_, index) => `instr(answer, ${sqliteDialect.param(parameters.length + index + 1)}) > 0`)
    .join(" AND ");

  const previous = Number(
    (database.prepare("PRAGMA secure_delete").get() as Record<string, number>).secure_delete ?? 0,
  );
  database.exec("PRAGMA secure_delete = ON");
  try {
    const counts = sqliteTransaction(database, () => {
      database.exec(`
        INSERT INTO memory_memories_search(memory_memories_search, rank) VALUES ('secure-delete', 1);
        INSERT INTO memory_chunks_fts(memory_chunks_fts, rank) VALUES ('secure-delete', 1);`);
      const versions = run(
        `DELETE FROM memory_history WHERE tenant_id = ${tenant} AND memory_id IN (${memoryIds})`,
      );
      const accessRecords = run(
        `DELETE FROM memory_access_log WHERE (${scoped}) OR (tenant_id = ${tenant} AND memory_id IN (${memoryIds}))`,
      );
      const memories = run(`DELETE FROM memory_memories WHERE ${scoped}`);
      const events = run(`DELETE FROM memory_events WHERE ${scoped}`);
      // memory_chunks_fts keeps its text in `chunks`: each row is told to the index before the row goes.
      run(
        `INSERT INTO memory_chunks_fts(memory_chunks_fts, rowid, content)
         SELECT 'delete', seq, content FROM memory_chunks WHERE tenant_id = ${tenant} AND document_id IN (${documentIds})`,
      );
      const chunks = run(
        `DELETE FROM memory_chunks WHERE tenant_id = ${tenant} AND document_id IN (${documentIds})`,
      );
      const documents = run(`DELETE FROM memory_documents WHERE ${scoped}`);
      const coreBlocks = run(`DELETE FROM memory_core_blocks WHERE tenant_id = ${tenant} AND ${blockScope}`);
      const traces = run(`DELETE FROM memory_traces WHERE ${scoped}`);
      const jobs = run(`DELETE FROM memory_jobs WHERE ${scoped}`);
      const idempotencyKeys = run(
        `DELETE FROM memory_idempotency_keys WHERE (${scoped})
           OR (tenant_id = ${tenant} AND user_id IS NULL AND agent_id IS NULL AND session_id IS NULL AND ${answerNames})`,
        [...parameters, ...fragments],
      );
      // The tenant's usage, counted again from what is left (ADR 0538): a purge is rare, writes add.
      run(fillUsageSql(sqliteBytes, tenant, sqliteMetadataBytes), [tenantId]);
      // A deleted entry's term can still name a page in the index's own b-tree: one merge rebuilds
      // each index from the entries that remain.
      database.exec(`
        INSERT INTO memory_memories_search(memory_memories_search, rank) VALUES ('secure-delete', 0);
        INSERT INTO memory_chunks_fts(memory_chunks_fts, rank) VALUES ('secure-delete', 0);
        INSERT INTO memory_memories_search(memory_memories_search) VALUES ('optimize');
        INSERT INTO memory_chunks_fts(memory_chunks_fts) VALUES ('optimize');`);
      return {
        memories,
        versions,
        events,
        documents,
        chunks,
        coreBlocks,
        traces,
        jobs,
        accessRecords,
        idempotencyKeys,
      };
    });
    // Earlier writes leave stale copies of rows in free space that secure_delete never saw (a page
    // split, an update moving a row): VACUUM rewrites the file from its live rows only, and the
    // checkpoint moves that into the file and empties the log that held the old pages.
    database.exec("VACUUM");
    database.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    return counts;
  } finally {
    database.exec(`PRAGMA secure_delete = ${previous === 0 ? "OFF" : "ON"}`);
  }
}

/** SQLite's UTF-8 length of a text column. */
export const sqliteBytes = (column: string) => `length(CAST(${column} AS BLOB))`;

/**
 * The bytes a row's metadata is charged as migration 14 counted them (ADR 0556): the UTF-8 length of
 * the JSON text SQLite keeps, an empty object's `{}` none (ADR 0559). Shipped: never edit.
 */
export const sqliteMetadataTextBytes = () =>
  `(CASE WHEN metadata = '{}' THEN 0 ELSE ${sqliteBytes("metadata")} END)`;

/**
 * The bytes a row's metadata was charged: a memory version and an event keep theirs in
 * `metadata_bytes` (ADR 0563: what the service wrote itself is charged nothing, which the JSON text
 * does not tell); a document, and a memory written before versions were kept, the JSON text's length.
 */
export const sqliteMetadataBytes = (table: MetadataTable) =>
  table === "memory_history" || table === "memory_events" ? "metadata_bytes" : sqliteMetadataTextBytes();
