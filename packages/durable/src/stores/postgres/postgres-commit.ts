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
  /** One counter of open runs per prefix (ADR 0127). */
  readonly openRuns: string;
}

export function durableTables(prefix: string): DurableTables {
  return {
    runs: `${prefix}runs`,
    journal: `${prefix}journal`,
    frames: `${prefix}frames`,
    openRuns: `${prefix}open_runs`,
  };
}

/** What a commit does to the run's place under the open-runs bound, besides its patch. */
export interface OpenMark {
  /** Mark the run as counted under this prefix, or as counted nowhere (null). */
  readonly set?: string | null;
  /**
   * The patch ends the run: give back the place it was counted under, read under the row's lock in the
   * same statement, and clear its mark, so two writes ending one run give it back once.
   */
  readonly release?: boolean;
}

/** Now by the database's clock, in the ISO form the other columns use. */
const databaseNow = postgresDialect.nowIso;

/**
 * One statement, so one round trip and atomic without BEGIN/COMMIT: the fenced UPDATE gates the
 * inserts (they join on its RETURNING row), and a fenced-out owner writes nothing.
 */
export async function applyBatch(
  client: pg.Pool | pg.PoolClient,
  { runs, journal, frames, openRuns }: DurableTables,
  threadId: string,
  batch: CommitBatch,
  owner: string,
  open: OpenMark = {},
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
  if (open.set !== undefined) {
    values.push(open.set);
    sets.push(`open_prefix = $${values.length}`);
  }
  const parts = [
    `fenced AS (UPDATE ${runs} SET ${sets.join(", ")} WHERE thread_id = $1 AND owner = $2 RETURNING thread_id)`,
  ];
  if (open.release === true) {
    // The mark as it was, read under the row lock (FOR UPDATE waits out a racing write and reads its
    // result): the UPDATE returns it beside clearing it, and the counter goes down only by a mark.
    parts[0] = `fenced AS (UPDATE ${runs} AS run SET ${sets.join(", ")}, open_prefix = NULL
      FROM (SELECT thread_id, open_prefix FROM ${runs} WHERE thread_id = $1 FOR UPDATE) AS was
      WHERE run.thread_id = $1 AND run.owner = $2 AND was.thread_id = run.thread_id
      RETURNING run.thread_id, was.open_prefix)`;
    parts.push(`released AS (UPDATE ${openRuns} SET n = n - 1 FROM fenced
      WHERE ${openRuns}.prefix = fenced.open_prefix)`);
  }
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
