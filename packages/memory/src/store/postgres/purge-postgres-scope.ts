/**
 * `purgePostgresScope`: hard deletion of a scope on PostgreSQL, in one transaction. The rows leave
 * every table and their generated full-text columns with them; their bytes stay in the table files
 * as dead tuples until PostgreSQL reuses the space or `VACUUM FULL` rewrites it (ADR 0365).
 */
import type pg from "pg";
import { MEMORY_SCOPE_VALUES, type MemoryScope } from "../../scope/memory-scope.ts";
import type { PurgeCounts } from "../memory-store.ts";
import { fillUsageSql } from "../tenant-usage.ts";
import { lockUsage, postgresBytes, postgresMetadataBytes } from "./postgres-sql.ts";

const columns = { userId: "user_id", agentId: "agent_id", sessionId: "session_id" } as const;

export async function purgePostgresScope(
  client: pg.PoolClient,
  tenantId: string,
  scope: MemoryScope,
): Promise<PurgeCounts> {
  const fields = MEMORY_SCOPE_VALUES.filter((field) => scope[field] !== undefined);
  if (fields.length === 0) throw new Error("purgeScope needs at least one scope field");
  const values = fields.map((field) => scope[field] as string);
  // $1 is the tenant, $2… the scope's values, in every statement.
  const parameters = [tenantId, ...values];
  const scoped = [
    "tenant_id = $1",
    ...fields.map((field, index) => `${columns[field]} = $${index + 2}`),
  ].join(" AND ");
  const run = async (sql: string, extra: readonly unknown[] = []) =>
    (await client.query(sql, [...parameters, ...extra])).rowCount ?? 0;
  const memoryIds = `SELECT id FROM memory_memories WHERE ${scoped}`;
  const documentIds = `SELECT id FROM memory_documents WHERE ${scoped}`;
  const blockScope = fields
    .map((field, index) => `(scope_key::jsonb ->> ${MEMORY_SCOPE_VALUES.indexOf(field)}) = $${index + 2}`)
    .join(" AND ");
  const answerNames = fields.map((_, index) => `strpos(answer, $${parameters.length + index + 1}) > 0`);
  const fragments = fields.map((field, index) => `"${field}":${JSON.stringify(values[index])}`);

  // The tenant's counter row, locked first (ADR 0538): a writer that charged it commits before the
  // purge goes on, and one that charges it after sees the count this purge leaves.
  await lockUsage(client, tenantId);
  // Then the scope's memories, in id order as the access counts lock them (ADR 0559): an access
  // recorded while the purge runs either committed before these locks (its rows are deleted below)
  // or waits for the purge and then finds its memory gone.
  await client.query(`SELECT id FROM memory_memories WHERE ${scoped} ORDER BY id FOR UPDATE`, parameters);
  const versions = await run(
    `DELETE FROM memory_history WHERE tenant_id = $1 AND memory_id IN (${memoryIds})`,
  );
  const accessRecords = await run(
    `DELETE FROM memory_access_log WHERE (${scoped}) OR (tenant_id = $1 AND memory_id IN (${memoryIds}))`,
  );
  const memories = await run(`DELETE FROM memory_memories WHERE ${scoped}`);
  const events = await run(`DELETE FROM memory_events WHERE ${scoped}`);
  const chunks = await run(
    `DELETE FROM memory_chunks WHERE tenant_id = $1 AND document_id IN (${documentIds})`,
  );
  const documents = await run(`DELETE FROM memory_documents WHERE ${scoped}`);
  const coreBlocks = await run(`DELETE FROM memory_core_blocks WHERE tenant_id = $1 AND ${blockScope}`);
  const traces = await run(`DELETE FROM memory_traces WHERE ${scoped}`);
  const jobs = await run(`DELETE FROM memory_jobs WHERE ${scoped}`);
  const idempotencyKeys = await run(
    `DELETE FROM memory_idempotency_keys WHERE (${scoped})
       OR (tenant_id = $1 AND user_id IS NULL AND agent_id IS NULL AND session_id IS NULL AND ${answerNames.join(" AND ")})`,
    fragments,
  );
  // Counted again from what is left: a purge is rare, and the lock keeps the tenant's writers out.
  await client.query(fillUsageSql(postgresBytes, "$1::text", postgresMetadataBytes), [tenantId]);
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
}
