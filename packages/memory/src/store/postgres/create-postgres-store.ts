/**
 * The scale-out store: PostgreSQL through `pg`, full-text search on generated tsvector columns. Its
 * methods live by aggregate (memories written, read, searched and counted; events; documents; core
 * blocks; traces; jobs; idempotency keys), each over one shared context (`postgres-sql.ts`).
 */

import { migratePostgres, openPostgres } from "@tackle/storage/postgres";
import type pg from "pg";
import type { MemoryStore } from "../memory-store.ts";
import { scopeCondition } from "../row-codec.ts";
import { heldFromRow, heldUsageSql, usageFromRow } from "../tenant-usage.ts";
import { postgresMigrations } from "./migrations.ts";
import { postgresCoreBlocks } from "./postgres-core-blocks.ts";
import { postgresDocuments } from "./postgres-documents.ts";
import { postgresEvents } from "./postgres-events.ts";
import { postgresIdempotency } from "./postgres-idempotency.ts";
import { postgresJobs } from "./postgres-jobs.ts";
import { postgresMemoryNeighbours } from "./postgres-memory-neighbours.ts";
import { postgresMemoryReads } from "./postgres-memory-reads.ts";
import { postgresMemorySearch } from "./postgres-memory-search.ts";
import { postgresMemoryStatistics } from "./postgres-memory-statistics.ts";
import { postgresMemoryWrites } from "./postgres-memory-writes.ts";
import { postgresRetention } from "./postgres-retention.ts";
import { mark, type PostgresContext, type Row } from "./postgres-sql.ts";
import { postgresTraces } from "./postgres-traces.ts";
import { createPostgresUnits } from "./postgres-unit-of-work.ts";
import { purgePostgresScope } from "./purge-postgres-scope.ts";

export interface PostgresStoreOptions {
  /** A `postgres://` URL, or an existing pool (left open by `close()`). */
  readonly connectionString?: string;
  readonly pool?: pg.Pool;
  /** Pool size when the store creates the pool (default 10). */
  readonly maxConnections?: number;
  /** How long a process's claim on a job lasts without a renewal (default 15 000 ms). */
  readonly jobLeaseMs?: number;
}

export async function createPostgresStore(options: PostgresStoreOptions): Promise<MemoryStore> {
  // One pool policy (idle-connection losses reported as a process warning; the pool replaces them).
  const handle = openPostgres({
    pool: options.pool,
    connectionString: options.connectionString,
    max: options.maxConnections ?? 10,
    label: "memory",
  });
  const pool = handle.pool;
  try {
    // Under the migration lock; refuses (StorageError "schema_too_new") tables of a newer version.
    await migratePostgres(pool, { store: "memory", migrations: postgresMigrations });
  } catch (error) {
    await handle.close();
    throw error;
  }
  const { units, db, transaction, unitOfWork } = createPostgresUnits(pool);
  const all = async (sql: string, parameters: readonly unknown[] = []) =>
    (await db().query(sql, parameters as unknown[])).rows as Row[];
  const one = async (sql: string, parameters: readonly unknown[] = []) => (await all(sql, parameters))[0];
  const context: PostgresContext = {
    pool,
    db,
    all,
    one,
    transaction,
    units,
    jobLeaseMs: options.jobLeaseMs ?? 15_000,
  };

  return {
    kind: "postgres",

    async close() {
      await handle.close();
    },

    ...unitOfWork,
    ...postgresMemoryWrites(context),
    ...postgresMemoryReads(context),
    ...postgresMemoryNeighbours(context),
    ...postgresMemorySearch(context),
    ...postgresMemoryStatistics(context),
    ...postgresEvents(context),
    ...postgresDocuments(context),
    ...postgresCoreBlocks(context),
    ...postgresTraces(context),
    ...postgresJobs(context),
    ...postgresIdempotency(context),
    ...postgresRetention(context),

    async purgeScope(tenantId, scope) {
      return transaction((client) => purgePostgresScope(client, tenantId, scope));
    },

    async usage(tenantId) {
      return usageFromRow(await one("SELECT * FROM memory_tenant_usage WHERE tenant_id = $1", [tenantId]));
    },

    async heldUsage(tenantId) {
      return heldFromRow(await one(heldUsageSql("$1"), [tenantId]));
    },

    async counts(tenantId, scope = {}) {
      const parameters: unknown[] = [tenantId];
      // One scope condition, its parameters shared by every subquery.
      const inScope = `tenant_id = $1${scopeCondition(scope, parameters, mark)}`;
      const row = await one(
        `SELECT
          (SELECT COUNT(*) FROM memory_memories WHERE ${inScope} AND status = 'active') AS memories,
          (SELECT COUNT(*) FROM memory_events WHERE ${inScope}) AS events,
          (SELECT COUNT(*) FROM memory_documents WHERE ${inScope}) AS documents,
          (SELECT COUNT(*) FROM memory_traces WHERE ${inScope}) AS traces,
          (SELECT COUNT(*) FROM memory_jobs WHERE ${inScope}) AS jobs`,
        parameters,
      );
      return {
        memories: Number(row?.memories ?? 0),
        events: Number(row?.events ?? 0),
        documents: Number(row?.documents ?? 0),
        traces: Number(row?.traces ?? 0),
        jobs: Number(row?.jobs ?? 0),
      };
    },
  };
}
