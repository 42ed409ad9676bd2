/**
 * The PostgreSQL store's records other than memories: events, documents and chunks, core blocks,
 * traces, jobs and their leases, idempotency keys, purge and counts.
 */
import type pg from "pg";
import { MEMORY_SCOPE_VALUES, scopeKey } from "../../scope/memory-scope.ts";
import type { AccessRecord, MemoryStore, StoredEvent } from "../memory-store.ts";
import {
  blockFromRow,
  documentFromRow,
  eventFromRow,
  idempotencyFromRow,
  jobFromRow,
  scopeCondition,
  scopeParameters,
  traceFromRow,
} from "../row-codec.ts";
import type { createUnitScope } from "../unit-scope.ts";
import { insertChunk, mark, marks, type PostgresUnit, type Row, tsQuery } from "./postgres-sql.ts";
import { purgePostgresScope } from "./purge-postgres-scope.ts";
import { traceStatement } from "./trace-statement.ts";

/** What the record methods share with the store: its pool, the unit of work's connection, helpers. */
export interface PostgresContext {
  readonly pool: pg.Pool;
  readonly db: () => pg.Pool | pg.PoolClient;
  readonly all: (sql: string, parameters?: readonly unknown[]) => Promise<Row[]>;
  readonly one: (sql: string, parameters?: readonly unknown[]) => Promise<Row | undefined>;
  readonly transaction: <T>(body: (client: pg.PoolClient) => Promise<T>) => Promise<T>;
  readonly units: ReturnType<typeof createUnitScope<PostgresUnit>>;
  readonly writeAccess: (client: pg.PoolClient, tenantId: string, access: AccessRecord) => Promise<void>;
  readonly jobLeaseMs: number;
}

export type PostgresRecordMethods = Pick<
  MemoryStore,
  | "appendEvent"
  | "appendEvents"
  | "listEvents"
  | "getEvents"
  | "countEvents"
  | "insertDocument"
  | "getDocument"
  | "searchChunks"
  | "countDocuments"
  | "getBlocks"
  | "saveBlocks"
  | "insertTrace"
  | "getTrace"
  | "listTraces"
  | "insertJob"
  | "updateJob"
  | "jobLeases"
  | "claimJob"
  | "getJob"
  | "listJobs"
  | "unfinishedJobs"
  | "findIdempotencyKey"
  | "recordIdempotencyKey"
  | "purgeScope"
  | "sweepIdempotencyKeys"
  | "counts"
>;

class BlockConflict extends Error {}

const eventColumns = [
  "id",
  "tenant_id",
  "custom_id",
  "role",
  "content",
  "user_id",
  "agent_id",
  "session_id",
  "metadata",
  "source",
  "import_job_id",
  "occurred_at",
  "created_at",
] as const;

function eventValues(event: Omit<StoredEvent, "seq">): unknown[] {
  return [
    event.id,
    event.tenantId,
    event.customId ?? null,
    event.role,
    event.content,
    ...scopeParameters(event),
    JSON.stringify(event.metadata),
    event.source,
    event.importJobId ?? null,
    event.occurredAt,
    event.createdAt,
  ];
}

/**
 * Appends events in order, a few statements for the lot (multi-row inserts, then one read of those
 * whose custom id was taken): each answered as stored, or as the event already holding its custom id.
 */
async function insertEvents(
  db: pg.Pool | pg.PoolClient,
  events: readonly Omit<StoredEvent, "seq">[],
): Promise<{ event: StoredEvent; created: boolean }[]> {
  const inserted = new Map<string, StoredEvent>();
  for (let from = 0; from < events.length; from += insertChunk) {
    const chunk = events.slice(from, from + insertChunk);
    const rows = chunk.map((_, index) => `(${marks(index * eventColumns.length + 1, eventColumns.length)})`);
    const result = await db.query(
      `INSERT INTO events (${eventColumns.join(", ")}) VALUES ${rows.join(", ")} ON CONFLICT DO NOTHING RETURNING *`,
      chunk.flatMap(eventValues),
    );
    for (const row of result.rows as Row[]) inserted.set(String(row.id), eventFromRow(row));
  }
  const taken = events.filter((event) => !inserted.has(event.id));
  const holders = new Map<string, StoredEvent>();
  if (taken.length > 0) {
    const rows = (
      await db.query(
        `SELECT e.* FROM events e JOIN unnest($1::text[], $2::text[]) AS k(tenant_id, custom_id)
         ON e.tenant_id = k.tenant_id AND e.custom_id = k.custom_id`,
        [taken.map((event) => event.tenantId), taken.map((event) => event.customId ?? null)],
      )
    ).rows as Row[];
    for (const row of rows)
      holders.set(`${String(row.tenant_id)}\u0000${String(row.custom_id)}`, eventFromRow(row));
  }
  return events.map((event) => {
    const created = inserted.get(event.id);
    if (created) return { event: created, created: true };
    const holder = holders.get(`${event.tenantId}\u0000${event.customId ?? ""}`);
    if (!holder) throw new Error(`event ${event.id} was neither inserted nor found by its custom id`);
    return { event: holder, created: false };
  });
}

export function postgresRecordMethods(context: PostgresContext): PostgresRecordMethods {
  const { pool, db, all, one, transaction, units, writeAccess, jobLeaseMs } = context;
  return {
    async appendEvent(event) {
      const [answer] = await insertEvents(db(), [event]);
      return answer!;
    },

    async appendEvents(events) {
      if (events.length === 0) return [];
      return transaction((client) => insertEvents(client, events));
    },

    async listEvents(tenantId, scope, listOptions) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT * FROM events WHERE tenant_id = $1${scopeCondition(scope, parameters, mark)}`;
      if (listOptions.cursor !== undefined) {
        parameters.push(listOptions.cursor);
        sql +=
          listOptions.order === "asc"
            ? ` AND seq > $${parameters.length}`
            : ` AND seq < $${parameters.length}`;
      }
      parameters.push(listOptions.limit);
      return (
        await all(
          `${sql} ORDER BY seq ${listOptions.order === "asc" ? "ASC" : "DESC"} LIMIT $${parameters.length}`,
          parameters,
        )
      ).map(eventFromRow);
    },

    async getEvents(tenantId, ids) {
      if (ids.length === 0) return [];
      return (
        await all("SELECT * FROM events WHERE tenant_id = $1 AND id = ANY($2) ORDER BY seq", [
          tenantId,
          [...ids],
        ])
      ).map(eventFromRow);
    },

    async countEvents(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      const row = await one(
        `SELECT COUNT(*) AS n FROM events WHERE tenant_id = $1${scopeCondition(scope, parameters, mark)}`,
        parameters,
      );
      return Number(row?.n ?? 0);
    },

    async insertDocument(document, chunks) {
      return transaction(async (client) => {
        const result = await client.query(
          `INSERT INTO documents (id, tenant_id, user_id, agent_id, session_id, scope_key, title, source, metadata, content_hash, chunk_count, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING`,
          [
            document.id,
            document.tenantId,
            ...scopeParameters(document),
            scopeKey(document),
            document.title,
            document.source ?? null,
            JSON.stringify(document.metadata),
            document.contentHash,
            document.chunkCount,
            document.createdAt,
          ],
        );
        if (result.rowCount !== 1) {
          const existing = (
            await client.query(
              "SELECT * FROM documents WHERE tenant_id = $1 AND scope_key = $2 AND content_hash = $3",
              [document.tenantId, scopeKey(document), document.contentHash],
            )
          ).rows[0];
          if (!existing) throw new Error(`document ${document.id} was neither inserted nor found`);
          return { document: documentFromRow(existing), created: false };
        }
        if (chunks.length > 0) {
          await client.query(
            `INSERT INTO chunks (id, tenant_id, document_id, ordinal, content)
             SELECT id, $1, $2, ordinal, content FROM unnest($3::text[], $4::int[], $5::text[]) AS c(id, ordinal, content)`,
            [
              document.tenantId,
              document.id,
              chunks.map((chunk) => chunk.id),
              chunks.map((chunk) => chunk.ordinal),
              chunks.map((chunk) => chunk.content),
            ],
          );
        }
        return { document, created: true };
      });
    },

    async getDocument(tenantId, id) {
      const row = await one("SELECT * FROM documents WHERE tenant_id = $1 AND id = $2", [tenantId, id]);
      return row ? documentFromRow(row) : undefined;
    },

    async searchChunks(tenantId, scope, terms, limit) {
      const query = tsQuery(terms);
      if (query.length === 0) return [];
      const parameters: unknown[] = [query, tenantId];
      const sql = `SELECT d.*, c.id AS chunk_id, c.ordinal AS chunk_ordinal, c.content AS chunk_content, ts_rank(c.tsv, q, 1) AS score
        FROM chunks c JOIN documents d ON d.id = c.document_id AND d.tenant_id = c.tenant_id, to_tsquery('english', $1) q
        WHERE c.tenant_id = $2 AND c.tsv @@ q${scopeCondition(scope, parameters, mark, "d.")}
        ORDER BY score DESC, c.seq LIMIT $${parameters.length + 1}`;
      parameters.push(limit);
      return (await all(sql, parameters)).map((row) => ({
        chunk: {
          id: String(row.chunk_id),
          ordinal: Number(row.chunk_ordinal),
          content: String(row.chunk_content),
        },
        document: documentFromRow(row),
        score: Number(row.score),
      }));
    },

    async countDocuments(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      const row = await one(
        `SELECT COUNT(*) AS n FROM documents WHERE tenant_id = $1${scopeCondition(scope, parameters, mark)}`,
        parameters,
      );
      return Number(row?.n ?? 0);
    },

    async getBlocks(tenantId, scope) {
      return (
        await all("SELECT * FROM core_blocks WHERE tenant_id = $1 AND scope_key = $2 ORDER BY label", [
          tenantId,
          scopeKey(scope),
        ])
      ).map(blockFromRow);
    },

    async saveBlocks(tenantId, scope, changes) {
      const key = scopeKey(scope);
      try {
        return await transaction(async (client) => {
          for (const { block, expectedVersion } of changes) {
            const result =
              expectedVersion === 0
                ? await client.query(
                    `INSERT INTO core_blocks (tenant_id, scope_key, label, value, limit_chars, version, updated_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
                    [tenantId, key, block.label, block.value, block.limit, block.version, block.updatedAt],
                  )
                : await client.query(
                    `UPDATE core_blocks SET value = $1, limit_chars = $2, version = $3, updated_at = $4
                     WHERE tenant_id = $5 AND scope_key = $6 AND label = $7 AND version = $8`,
                    [
                      block.value,
                      block.limit,
                      block.version,
                      block.updatedAt,
                      tenantId,
                      key,
                      block.label,
                      expectedVersion,
                    ],
                  );
            if (result.rowCount !== 1) throw new BlockConflict();
          }
          return true;
        });
      } catch (error) {
        if (error instanceof BlockConflict) return false;
        throw error;
      }
    },

    async insertTrace(trace, accesses) {
      const statement = units.active() === undefined ? traceStatement(trace, accesses) : undefined;
      if (statement) {
        await pool.query(statement);
        return;
      }
      // Inside a unit of work: its own commit decides durability, so a savepoint as before.
      await transaction(async (client) => {
        await client.query(
          `INSERT INTO traces (id, tenant_id, user_id, agent_id, session_id, operation, query, ranking, results, duration_ms, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
          [
            trace.id,
            trace.tenantId,
            ...scopeParameters(trace),
            trace.operation,
            trace.query,
            trace.ranking,
            JSON.stringify(trace.results),
            trace.durationMs,
            trace.createdAt,
          ],
        );
        for (const access of accesses) await writeAccess(client, trace.tenantId, access);
      });
    },

    async getTrace(tenantId, id) {
      const row = await one("SELECT * FROM traces WHERE tenant_id = $1 AND id = $2", [tenantId, id]);
      return row ? traceFromRow(row) : undefined;
    },

    async listTraces(tenantId, scope, listOptions) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT * FROM traces WHERE tenant_id = $1${scopeCondition(scope, parameters, mark)}`;
      if (listOptions.operation) {
        parameters.push(listOptions.operation);
        sql += ` AND operation = $${parameters.length}`;
      }
      parameters.push(listOptions.limit);
      return (await all(`${sql} ORDER BY seq DESC LIMIT $${parameters.length}`, parameters)).map(
        traceFromRow,
      );
    },

    async insertJob(job) {
      await db().query(
        `INSERT INTO jobs (id, tenant_id, user_id, agent_id, session_id, type, status, input, result, error, created_at, started_at, finished_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
        [
          job.id,
          job.tenantId,
          ...scopeParameters(job),
          job.type,
          job.status,
          JSON.stringify(job.input),
          job.result === undefined ? null : JSON.stringify(job.result),
          job.error === undefined ? null : JSON.stringify(job.error),
          job.createdAt,
          job.startedAt ?? null,
          job.finishedAt ?? null,
        ],
      );
    },

    async updateJob(job) {
      await db().query(
        "UPDATE jobs SET status = $1, result = $2, error = $3, started_at = $4, finished_at = $5 WHERE tenant_id = $6 AND id = $7",
        [
          job.status,
          job.result === undefined ? null : JSON.stringify(job.result),
          job.error === undefined ? null : JSON.stringify(job.error),
          job.startedAt ?? null,
          job.finishedAt ?? null,
          job.tenantId,
          job.id,
        ],
      );
    },

    jobLeases: {
      leaseMs: jobLeaseMs,
      async claimNext(owner, startedAt) {
        // One statement: the row is locked, skipped by other claimants, and leased by the database's clock.
        const result = await pool.query(
          `UPDATE jobs SET status = 'running', started_at = COALESCE(started_at, $3), lease_owner = $1,
             lease_until = clock_timestamp() + $2 * interval '1 millisecond'
           WHERE seq = (
             SELECT seq FROM jobs
             WHERE status = 'queued' OR (status = 'running' AND (lease_until IS NULL OR lease_until < clock_timestamp()))
             ORDER BY seq FOR UPDATE SKIP LOCKED LIMIT 1)
           RETURNING *`,
          [owner, jobLeaseMs, startedAt],
        );
        const row = result.rows[0] as Row | undefined;
        return row === undefined ? undefined : jobFromRow(row);
      },
      async renew(job, owner) {
        const result = await pool.query(
          `UPDATE jobs SET lease_until = clock_timestamp() + $1 * interval '1 millisecond'
           WHERE tenant_id = $2 AND id = $3 AND lease_owner = $4 AND status = 'running'`,
          [jobLeaseMs, job.tenantId, job.id, owner],
        );
        return result.rowCount === 1;
      },
      async finish(job, owner) {
        const result = await pool.query(
          `UPDATE jobs SET status = $1, result = $2, error = $3, finished_at = $4, lease_until = NULL
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
    },

    async claimJob(tenantId, id, startedAt, orphanedBefore) {
      const result = await db().query(
        `UPDATE jobs SET status = 'running', started_at = $1
         WHERE tenant_id = $2 AND id = $3 AND (status = 'queued' OR (status = 'running' AND started_at < $4))`,
        [startedAt, tenantId, id, orphanedBefore],
      );
      return result.rowCount === 1;
    },

    async getJob(tenantId, id) {
      const row = await one("SELECT * FROM jobs WHERE tenant_id = $1 AND id = $2", [tenantId, id]);
      return row ? jobFromRow(row) : undefined;
    },

    async listJobs(tenantId, scope, listOptions) {
      const parameters: unknown[] = [tenantId];
      let sql = `SELECT * FROM jobs WHERE tenant_id = $1${scopeCondition(scope, parameters, mark)}`;
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
      return (await all("SELECT * FROM jobs WHERE status IN ('queued', 'running') ORDER BY seq")).map(
        jobFromRow,
      );
    },

    async findIdempotencyKey(tenantId, key, now) {
      const row = await one(
        "SELECT * FROM idempotency_keys WHERE tenant_id = $1 AND key = $2 AND expires_at > $3",
        [tenantId, key, now],
      );
      return row ? idempotencyFromRow(row) : undefined;
    },

    async recordIdempotencyKey(record) {
      // A new key, or one whose record expired (replaced in place). A concurrent transaction that
      // recorded the key first holds its index entry: this waits for it to commit (then false) or
      // roll back (then true).
      const result = await db().query(
        `INSERT INTO idempotency_keys (tenant_id, key, fingerprint, answer, created_at, expires_at, user_id, agent_id, session_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (tenant_id, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, answer = EXCLUDED.answer,
           created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at, user_id = EXCLUDED.user_id,
           agent_id = EXCLUDED.agent_id, session_id = EXCLUDED.session_id
         WHERE idempotency_keys.expires_at <= EXCLUDED.created_at`,
        [
          record.tenantId,
          record.key,
          record.fingerprint,
          record.answer,
          record.createdAt,
          record.expiresAt,
          ...MEMORY_SCOPE_VALUES.map((field) => record.scope[field] ?? null),
        ],
      );
      return result.rowCount === 1;
    },

    async purgeScope(tenantId, scope) {
      return transaction((client) => purgePostgresScope(client, tenantId, scope));
    },

    async sweepIdempotencyKeys(now) {
      const result = await db().query("DELETE FROM idempotency_keys WHERE expires_at <= $1", [now]);
      return result.rowCount ?? 0;
    },

    async counts(tenantId, scope = {}) {
      const parameters: unknown[] = [tenantId];
      // One scope condition, its parameters shared by every subquery.
      const inScope = `tenant_id = $1${scopeCondition(scope, parameters, mark)}`;
      const row = await one(
        `SELECT
          (SELECT COUNT(*) FROM memories WHERE ${inScope} AND status = 'active') AS memories,
          (SELECT COUNT(*) FROM events WHERE ${inScope}) AS events,
          (SELECT COUNT(*) FROM documents WHERE ${inScope}) AS documents,
          (SELECT COUNT(*) FROM traces WHERE ${inScope}) AS traces,
          (SELECT COUNT(*) FROM jobs WHERE ${inScope}) AS jobs`,
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
