/** Jobs: inserted, claimed, updated and listed. */
import type { MemoryStore } from "../memory-store.ts";
import { jobFromRow, jobUpdateValues, jobValues, scopeCondition } from "../row-codec.ts";
import { checkHeld, heldJobsSql } from "../tenant-usage.ts";
import { bind, mark, type SqliteContext } from "./sqlite-sql.ts";

const heldSql = heldJobsSql("?");

export function sqliteJobs(
  context: SqliteContext,
): Pick<
  MemoryStore,
  "insertJob" | "updateJob" | "claimJob" | "getJob" | "jobRunning" | "listJobs" | "unfinishedJobs"
> {
  const { all, get, run, transaction } = context;
  return {
    async insertJob(job, limits) {
      transaction(() => {
        if (limits && job.status === "queued") {
          const before = Number(get(heldSql, [job.tenantId])!.jobs);
          checkHeld("queuedJobs", before, before + 1, limits);
        }
        run(
          `INSERT INTO memory_jobs (id, tenant_id, user_id, agent_id, session_id, type, status, input, result, error, created_at, started_at, finished_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          jobValues(job),
        );
      });
    },

    async updateJob(job) {
      // A finished job's input is dropped (ADR 0551): an import's turns are events by then.
      run(
        `UPDATE memory_jobs SET status = ?1, result = ?2, error = ?3, started_at = ?4, finished_at = ?5,
           input = CASE WHEN ?1 IN ('succeeded', 'failed') THEN 'null' ELSE coalesce(?8, input) END
         WHERE tenant_id = ?6 AND id = ?7`,
        jobUpdateValues(job),
      );
    },

    async claimJob(tenantId, id, startedAt, orphanedBefore) {
      const result = run(
        `UPDATE memory_jobs SET status = 'running', started_at = ?
         WHERE tenant_id = ? AND id = ? AND (status = 'queued' OR (status = 'running' AND started_at < ?))`,
        [startedAt, tenantId, id, orphanedBefore],
      );
      return result.changes === 1;
    },

    async getJob(tenantId, id) {
      const row = get("SELECT * FROM memory_jobs WHERE tenant_id = ? AND id = ?", [tenantId, id]);
      return row ? jobFromRow(row) : undefined;
    },

    async jobRunning(tenantId, id) {
      const sql = "SELECT 1 AS held FROM memory_jobs WHERE id = ? AND tenant_id = ? AND status = 'running'";
      return get(sql, [id, tenantId]) !== undefined;
    },

    async listJobs(tenantId, scope, listOptions) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT * FROM memory_jobs WHERE tenant_id = ${mark(1)}${scopeCondition(scope, parameters, mark)}`;
      if (listOptions.type) sql += ` AND type = ${bind(parameters, listOptions.type)}`;
      if (listOptions.status) sql += ` AND status = ${bind(parameters, listOptions.status)}`;
      return all(`${sql} ORDER BY seq DESC LIMIT ${bind(parameters, listOptions.limit)}`, parameters).map(
        jobFromRow,
      );
    },

    async unfinishedJobs() {
      return all("SELECT * FROM memory_jobs WHERE status IN ('queued', 'running') ORDER BY seq", []).map(
        jobFromRow,
      );
    },
  };
}
