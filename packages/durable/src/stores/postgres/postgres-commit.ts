/** A commit to the PostgreSQL store: the run's patch, journal records and frames in one fenced statement. */
import { postgresDialect } from "@tackle/storage";
import type pg from "pg";
import type { CommitBatch } from "../../store/durable-store.ts";
import { patchColumns, runFenced } from "../run-row.ts";

/** The store's three tables, named with its prefix. */
export interface DurableTables {
  readonly runs: string;
  readonly journal: string;
  readonly frames: string;
}

export function durableTables(prefix: string): DurableTables {
  return { runs: `${prefix}runs`, journal: `${prefix}journal`, frames: `${prefix}frames` };
}

/** Now by the database's clock, in the ISO form the other columns use. */
const databaseNow = postgresDialect.nowIso;

/**
 * One statement, so one round trip and atomic without BEGIN/COMMIT: the fenced UPDATE gates the
 * inserts (they join on its RETURNING row), and a fenced-out owner writes nothing.
 */
export async function applyBatch(
  client: pg.Pool | pg.PoolClient,
  { runs, journal, frames }: DurableTables,
  threadId: string,
  batch: CommitBatch,
  owner: string,
): Promise<void> {
  const patch = batch.run ?? {};
  const values: unknown[] = [threadId, owner];
  // The database's clock, never this machine's: the lease is judged against it (claimRun).
  const sets: string[] = [`updated_at = ${databaseNow}`];
  for (const [field, column] of Object.entries(patchColumns)) {
    if (field in patch) {
      values.push(patch[field as keyof typeof patchColumns] ?? null);
      sets.push(`${column} = $${values.length}`);
    }
  }
  const parts = [
    `fenced AS (UPDATE ${runs} SET ${sets.join(", ")} WHERE thread_id = $1 AND owner = $2 RETURNING thread_id)`,
  ];
  const records = batch.journal ?? [];
  if (records.length > 0) {
    const at = values.length;
    values.push(
      records.map((record) => record.key),
      records.map((record) => record.name),
      records.map((record) => record.state),
      records.map((record) => record.attempt),
      records.map((record) => record.value),
    );
    parts.push(`journaled AS (INSERT INTO ${journal} (thread_id, key, name, state, attempt, value)
      SELECT fenced.thread_id, item.* FROM fenced,
        unnest($${at + 1}::text[], $${at + 2}::text[], $${at + 3}::text[], $${at + 4}::int[], $${at + 5}::text[]) AS item
      ON CONFLICT (thread_id, key) DO UPDATE SET name = excluded.name, state = excluded.state,
        attempt = excluded.attempt, value = excluded.value)`);
  }
  const list = batch.frames ?? [];
  if (list.length > 0) {
    const at = values.length;
    values.push(
      list.map((frame) => frame.seq),
      list.map((frame) => frame.type),
      list.map((frame) => JSON.stringify(frame.data ?? null)),
    );
    parts.push(`framed AS (INSERT INTO ${frames} (thread_id, seq, type, data)
      SELECT fenced.thread_id, item.* FROM fenced, unnest($${at + 1}::bigint[], $${at + 2}::text[], $${at + 3}::jsonb[]) AS item)`);
  }
  const result = await client.query(
    `WITH ${parts.join(", ")} SELECT count(*)::int AS fenced FROM fenced`,
    values,
  );
  if (result.rows[0]?.fenced !== 1) {
    throw runFenced(threadId);
  }
}
