/** Jobs: inserted, updated, listed, and claimed by any process under a lease by the database's clock. */
import type { JobLeases, MemoryStore } from "../memory-store.ts";
import { jobFromRow, jobUpdateValues, jobValues, scopeCondition } from "../row-codec.ts";
import { checkHeld, heldJobsSql } from "../tenant-usage.ts";
import { lockUsage, mark, type PostgresContext, type Row } from "./postgres-sql.ts";

const heldSql = heldJobsSql("$1");
/** A finished job's input is dropped (ADR 0551): an import's turns are events by then. */
const dropInput = (status: string, otherwise = "input") =>
  `input = CASE WHEN ${status}::text IN ('succeeded', 'failed') THEN 'null'::jsonb ELSE ${otherwise} END`;

export function postgresJobs(
  context: PostgresContext,
): Pick<
  MemoryStore,
  | "insertJob"
  | "updateJob"
  | "jobLeases"
  | "claimJob"
  | "getJob"
  | "jobRunning"
  | "listJobs"
  | "unfinishedJobs"
> {
  const { db, all, one, transaction } = context;
  return {
    async insertJob(job, limits) {
      await transaction(async (client) => {
        if (limits && job.status === "queued") {
          // Under the tenant's counter row (ADR 0538): two enqueues cannot both take the last place.
          await lockUsage(client, job.tenantId);
          const before = Number((await client.query(heldSql, [job.tenantId])).rows[0].jobs);
          checkHeld("queuedJobs", before, before + 1, limits);
        }
        await client.query(
          `INSERT INTO memory_jobs (id, tenant_id, user_id, agent_id, session_id, type, status, input, result, error, created_at, started_at, finished_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
          jobValues(job),
        );
      });
    },

    async updateJob(job) {
      await db().query(
        `UPDATE memory_jobs SET status = $1, result = $2, error = $3, started_at = $4, finished_at = $5, ${dropInput("$1", "coalesce($8::jsonb, input)")}
         WHERE tenant_id = $6 AND id = $7`,
        jobUpdateValues(job),
      );
    },

    jobLeases: postgresJobLeases(context),

    async claimJob(tenantId, id, startedAt, orphanedBefore) {
      const result = await db().query(
        `UPDATE memory_jobs SET status = 'running', started_at = $1
         WHERE tenant_id = $2 AND id = $3 AND (status = 'queued' OR (status = 'running' AND started_at < $4))`,
        [startedAt, tenantId, id, orphanedBefore],
      );
      return result.rowCount === 1;
    },

    async getJob(tenantId, id) {
      const row = await one("SELECT * FROM memory_jobs WHERE tenant_id = $1 AND id = $2", [tenantId, id]);
      return row ? jobFromRow(row) : undefined;
    },

    async jobRunning(tenantId, id) {
      const sql = "SELECT 1 AS held FROM memory_jobs WHERE id = $1 AND tenant_id = $2 AND status = 'running'";
      return (await one(sql, [id, tenantId])) !== undefined;
    },

    async listJobs(tenantId, scope, listOptions) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT * FROM memory_jobs WHERE tenant_id = $1${scopeCondition(scope, parameters, mark)}`;
      if (listOptions.type) {
        parameters.push(listOptions.type);
        sql += ` AND type = $${parameters.length}`;
      }
      if (listOptions.status) {
        parameters.push(listOptions.status);
        sql += ` AND status = $${parameters.length}`;
      }
      parameters.push(listOptions.limit);
      return (await all(`${sql} ORDER BY seq DESC LIMIT $${parameters.length}`, parameters)).map(jobFromRow);
    },

    async unfinishedJobs() {
      return (await all("SELECT * FROM memory_jobs WHERE status IN ('queued', 'running') ORDER BY seq")).map(
        jobFromRow,
      );
    },
  };
}

/** Any process claims the next job with a lease by the database's clock, renews it, finishes while it holds it. */
function postgresJobLeases({ pool, jobLeaseMs }: PostgresContext): JobLeases {
  return {
    leaseMs: jobLeaseMs,
    async claimNext(owner, startedAt) {
      // One statement: the row is locked, skipped by other claimants, and leased by the database's clock.
      // A job leased to `owner` itself is claimable at once: a process claims only while it runs no
      // job, so such a job is one whose claim's answer it lost, or whose outcome it could not write
      // (ADR 0570); waiting out the lease would hold the job up for nothing.
      const result = await pool.query(
        `UPDATE memory_jobs SET status = 'running', started_at = COALESCE(started_at, $3), lease_owner = $1,
           lease_until = clock_timestamp() + $2 * interval '1 millisecond'
         WHERE seq = (
           SELECT seq FROM memory_jobs
           WHERE status = 'queued'
             OR (status = 'running' AND (lease_until IS NULL OR lease_until < clock_timestamp() OR lease_owner = $1))
           ORDER BY seq FOR UPDATE SKIP LOCKED LIMIT 1)
         RETURNING *`,
        [owner, jobLeaseMs, startedAt],
      );
      const row = result.rows[0] as Row | undefined;
      return row === undefined ? undefined : jobFromRow(row);
    },
    async renew(job, owner) {
      const result = await pool.query(
        `UPDATE memory_jobs SET lease_until = clock_timestamp() + $1 * interval '1 millisecond'
         WHERE tenant_id = $2 AND id = $3 AND lease_owner = $4 AND status = 'running'`,
        [jobLeaseMs, job.tenantId, job.id, owner],
      );
      return result.rowCount === 1;
    },
    async finish(job, owner) {
      const result = await pool.query(
        `UPDATE memory_jobs SET status = $1, result = $2, error = $3, finished_at = $4, lease_until = NULL, ${dropInput("$1")}
         WHERE tenant_id = $5 AND id = $6 AND lease_owner = $7 AND status = 'running'`,
        [
          job.status,
          job.result === undefined ? null : JSON.stringify(job.result),
          job.error === undefined ? null : JSON.stringify(job.error),
          job.finishedAt ?? null,
          job.tenantId,
          job.id,
          owner,
        ],
      );
      return result.rowCount === 1;
    },
  };
}
