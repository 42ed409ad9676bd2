/**
 * Retention on SQLite: a tenant's or a user's traces and finished jobs past their newest, and expired
 * records, in batches.
 */
import type { MemoryStore } from "../memory-store.ts";
import { cutRows, deletableJob } from "../retention-sql.ts";
import type { SqliteContext } from "./sqlite-sql.ts";

export function sqliteRetention(
  context: SqliteContext,
): Pick<MemoryStore, "pruneTraces" | "pruneJobs" | "expireRecords"> {
  const { run, transaction } = context;
  const deleted = (sql: string, parameters: readonly unknown[]) => Number(run(sql, parameters).changes);
  return {
    async pruneTraces(tenantId, keep, limit, userId) {
      return deleted(
        `DELETE FROM memory_traces WHERE seq IN (
           SELECT seq FROM memory_traces WHERE tenant_id = ?1${cutRows(userId, "?4")}
           ORDER BY seq DESC LIMIT ?3 OFFSET ?2)`,
        [tenantId, keep, limit, ...(typeof userId === "string" ? [userId] : [])],
      );
    },

    async pruneJobs(tenantId, keep, limit, userId) {
      return deleted(
        `DELETE FROM memory_jobs WHERE seq IN (
           SELECT seq FROM memory_jobs AS j WHERE j.tenant_id = ?1${cutRows(userId, "?4")} AND ${deletableJob}
           ORDER BY seq DESC LIMIT ?3 OFFSET ?2)`,
        [tenantId, keep, limit, ...(typeof userId === "string" ? [userId] : [])],
      );
    },

    async expireRecords(cutoffs, limit) {
      return transaction(() => ({
        traces: deleted(
          "DELETE FROM memory_traces WHERE seq IN (SELECT seq FROM memory_traces WHERE created_at < ?1 LIMIT ?2)",
          [cutoffs.tracesBefore, limit],
        ),
        jobs: deleted(
          `DELETE FROM memory_jobs WHERE seq IN (
             SELECT seq FROM memory_jobs AS j WHERE j.finished_at < ?1 AND ${deletableJob} LIMIT ?2)`,
          [cutoffs.jobsFinishedBefore, limit],
        ),
        accessRecords: deleted(
          "DELETE FROM memory_access_log WHERE rowid IN (SELECT rowid FROM memory_access_log WHERE day < ?1 LIMIT ?2)",
          [cutoffs.accessBeforeDay, limit],
        ),
      }));
    },
  };
}
