/**
 * Retention on PostgreSQL: a tenant's or a user's traces and finished jobs past their newest, and
 * expired records, in batches.
 */
import type { MemoryStore } from "../memory-store.ts";
import { cutRows, deletableJob } from "../retention-sql.ts";
import type { PostgresContext } from "./postgres-sql.ts";

export function postgresRetention(
  context: PostgresContext,
): Pick<MemoryStore, "pruneTraces" | "pruneJobs" | "expireRecords"> {
  const { db, transaction } = context;
  const deleted = async (sql: string, parameters: readonly unknown[]) =>
    (await db().query(sql, parameters as unknown[])).rowCount ?? 0;
  return {
    pruneTraces: (tenantId, keep, limit, userId) =>
      deleted(
        `DELETE FROM memory_traces WHERE seq IN (
           SELECT seq FROM memory_traces WHERE tenant_id = $1${cutRows(userId, "$4")}
           ORDER BY seq DESC OFFSET $2 LIMIT $3)`,
        [tenantId, keep, limit, ...(typeof userId === "string" ? [userId] : [])],
      ),

    pruneJobs: (tenantId, keep, limit, userId) =>
      deleted(
        `DELETE FROM memory_jobs WHERE seq IN (
           SELECT seq FROM memory_jobs AS j WHERE j.tenant_id = $1${cutRows(userId, "$4")} AND ${deletableJob}
           ORDER BY seq DESC OFFSET $2 LIMIT $3)`,
        [tenantId, keep, limit, ...(typeof userId === "string" ? [userId] : [])],
      ),

    expireRecords: (cutoffs, limit) =>
      transaction(async (client) => {
        const count = async (sql: string, parameters: unknown[]) =>
          (await client.query(sql, parameters)).rowCount ?? 0;
        return {
          traces: await count(
            "DELETE FROM memory_traces WHERE seq IN (SELECT seq FROM memory_traces WHERE created_at < $1 LIMIT $2)",
            [cutoffs.tracesBefore, limit],
          ),
          jobs: await count(
            `DELETE FROM memory_jobs WHERE seq IN (
               SELECT seq FROM memory_jobs AS j WHERE j.finished_at < $1 AND ${deletableJob} LIMIT $2)`,
            [cutoffs.jobsFinishedBefore, limit],
          ),
          // The counts have no key of one column: a batch is named by the rows' physical places.
          accessRecords: await count(
            "DELETE FROM memory_access_log WHERE ctid = ANY (ARRAY (SELECT ctid FROM memory_access_log WHERE day < $1 LIMIT $2))",
            [cutoffs.accessBeforeDay, limit],
          ),
        };
      }),
  };
}
