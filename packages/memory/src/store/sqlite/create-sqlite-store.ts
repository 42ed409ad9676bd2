/**
 * The embedded store: one SQLite file through `node:sqlite`, BM25 through FTS5. Its methods live by
 * aggregate (memories written, read, searched and counted; events; documents; core blocks; traces;
 * jobs; idempotency keys), each over the connection's shared statement helpers (`sqlite-sql.ts`).
 */
import type { DatabaseSync, SQLInputValue } from "node:sqlite";
import { openMigratedSqlite } from "@tackle/storage";
import type { MemoryStore } from "../memory-store.ts";
import { scopeCondition } from "../row-codec.ts";
import { heldFromRow, heldUsageSql, usageFromRow } from "../tenant-usage.ts";
import { sqliteMigrations } from "./migrations.ts";
import { purgeSqliteScope } from "./purge-sqlite-scope.ts";
import { scopeTokens } from "./scope-tokens.ts";
import { sqliteCoreBlocks } from "./sqlite-core-blocks.ts";
import { sqliteDocuments } from "./sqlite-documents.ts";
import { sqliteEvents } from "./sqlite-events.ts";
import { sqliteIdempotency } from "./sqlite-idempotency.ts";
import { sqliteJobs } from "./sqlite-jobs.ts";
import { sqliteMemoryNeighbours } from "./sqlite-memory-neighbours.ts";
import { sqliteMemoryReads } from "./sqlite-memory-reads.ts";
import { sqliteMemorySearch } from "./sqlite-memory-search.ts";
import { sqliteMemoryStatistics } from "./sqlite-memory-statistics.ts";
import { sqliteMemoryWrites } from "./sqlite-memory-writes.ts";
import { sqliteRetention } from "./sqlite-retention.ts";
import { createSqliteContext, mark } from "./sqlite-sql.ts";
import { sqliteTraces } from "./sqlite-traces.ts";
import { withSqliteUnitsOfWork } from "./sqlite-unit-of-work.ts";

export interface SqliteStoreOptions {
  /** A file path, or `:memory:` for a throwaway store. */
  readonly path: string;
}

export function createSqliteStore(options: SqliteStoreOptions): MemoryStore {
  // Refuses (StorageError "schema_too_new") a file written by a newer version of this store.
  const database = openMigratedSqlite({
    path: options.path,
    synchronous: "normal",
    store: "memory",
    migrations: sqliteMigrations,
  });
  backfillSearchIndex(database);
  const context = createSqliteContext(database);
  const { get } = context;

  const store: Omit<MemoryStore, "withTransaction" | "afterCommit"> = {
    kind: "sqlite",

    async close() {
      if (database.isOpen) database.close();
    },

    ...sqliteMemoryWrites(context),
    ...sqliteMemoryReads(context),
    ...sqliteMemoryNeighbours(context),
    ...sqliteMemorySearch(context),
    ...sqliteMemoryStatistics(context),
    ...sqliteEvents(context),
    ...sqliteDocuments(context),
    ...sqliteCoreBlocks(context),
    ...sqliteTraces(context),
    ...sqliteJobs(context),
    ...sqliteIdempotency(context),
    ...sqliteRetention(context),

    async purgeScope(tenantId, scope) {
      return purgeSqliteScope(database, tenantId, scope);
    },

    async counts(tenantId, scope = {}) {
      const count = (table: string, extra = "") => {
        const parameters: unknown[] = [tenantId];
        const where = `tenant_id = ${mark(1)}${scopeCondition(scope, parameters, mark)}${extra}`;
        return Number(get(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`, parameters)?.n ?? 0);
      };
      return {
        memories: count("memory_memories", " AND status = 'active'"),
        events: count("memory_events"),
        documents: count("memory_documents"),
        traces: count("memory_traces"),
        jobs: count("memory_jobs"),
      };
    },

    async usage(tenantId) {
      return usageFromRow(get("SELECT * FROM memory_tenant_usage WHERE tenant_id = ?", [tenantId]));
    },

    async heldUsage(tenantId) {
      return heldFromRow(get(heldUsageSql("?1"), [tenantId]));
    },
  };
  return withSqliteUnitsOfWork(database, store, sqliteWrites);
}

/** The methods that write: inside a unit of work, the first of them begins its transaction. */
const sqliteWrites: ReadonlySet<string> = new Set([
  "insertMemory",
  "insertMemories",
  "updateMemory",
  "recordAccess",
  "appendEvent",
  "appendEvents",
  "insertDocument",
  "saveBlocks",
  "insertTrace",
  "insertJob",
  "updateJob",
  "claimJob",
  "recordIdempotencyKey",
  "sweepIdempotencyKeys",
  "purgeScope",
  "pruneTraces",
  "pruneJobs",
  "expireRecords",
]);

/** Gives every memory without scope tokens its tokens and its row in the search index. */
function backfillSearchIndex(database: DatabaseSync): void {
  const missing = database
    .prepare(
      "SELECT seq, tenant_id, user_id, agent_id, session_id, content FROM memory_memories WHERE scope_tokens = ''",
    )
    .all() as Record<string, SQLInputValue>[];
  if (missing.length === 0) return;
  const update = database.prepare("UPDATE memory_memories SET scope_tokens = ? WHERE seq = ?");
  const index = database.prepare(
    "INSERT INTO memory_memories_search(rowid, content, scope) VALUES (?, ?, ?)",
  );
  database.exec("BEGIN IMMEDIATE");
  try {
    for (const row of missing) {
      const tokens = scopeTokens(String(row.tenant_id), {
        ...(row.user_id === null ? {} : { userId: String(row.user_id) }),
        ...(row.agent_id === null ? {} : { agentId: String(row.agent_id) }),
        ...(row.session_id === null ? {} : { sessionId: String(row.session_id) }),
      }).join(" ");
      update.run(tokens, row.seq!);
      database.prepare("DELETE FROM memory_memories_search WHERE rowid = ?").run(row.seq!);
      index.run(row.seq!, String(row.content), tokens);
    }
    database.exec("COMMIT");
  } catch (error) {
    database.exec("ROLLBACK");
    throw error;
  }
}
