/** The durable SQLite store's statements, prepared once per open file. */
import type { DatabaseSync, StatementSync } from "node:sqlite";
import { sqliteDialect as sql } from "@tackle/storage";
import { runColumns } from "../run-row.ts";

export type DurableStatements = ReturnType<typeof prepareStatements>;

export function prepareStatements(database: DatabaseSync) {
  const insertRun = database.prepare(
    `INSERT INTO durable_runs (${runColumns}, open_prefix)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const selectRun = database.prepare("SELECT * FROM durable_runs WHERE thread_id = ?");
  const selectOpenPrefix = database.prepare(
    "SELECT status, open_prefix FROM durable_runs WHERE thread_id = ?",
  );
  const upsertJournal = database.prepare(
    `INSERT INTO durable_journal (thread_id, key, name, state, attempt, value) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (thread_id, key) DO UPDATE SET name = excluded.name, state = excluded.state,
     attempt = excluded.attempt, value = excluded.value`,
  );
  const insertFrame = database.prepare(
    "INSERT INTO durable_frames (thread_id, seq, type, data) VALUES (?, ?, ?, ?)",
  );
  const selectJournal = database.prepare(
    "SELECT key, name, state, attempt, value FROM durable_journal WHERE thread_id = ?",
  );
  const selectFrames = database.prepare(
    "SELECT seq, type, data FROM durable_frames WHERE thread_id = ? AND seq > ? ORDER BY seq LIMIT ?",
  );
  const selectLastSeq = database.prepare(
    "SELECT COALESCE(MAX(seq), 0) AS seq FROM durable_frames WHERE thread_id = ?",
  );
  const selectThreads = database.prepare(
    `SELECT * FROM durable_runs WHERE ${sql.startsWith("thread_id", 1)} AND thread_id > ?2
     ORDER BY thread_id LIMIT ?3`,
  );
  const deleteRun = database.prepare("DELETE FROM durable_runs WHERE thread_id = ? RETURNING open_prefix");
  const deleteJournal = database.prepare("DELETE FROM durable_journal WHERE thread_id = ?");
  const deleteFrames = database.prepare("DELETE FROM durable_frames WHERE thread_id = ?");
  const selectStale = database.prepare(
    `SELECT thread_id, status, open_prefix FROM durable_runs WHERE ${sql.startsWith("thread_id", 1)} AND updated_at < ?2
     ORDER BY updated_at LIMIT ?3`,
  );
  const selectSilent = database.prepare(
    `SELECT thread_id FROM durable_runs WHERE status = 'running' AND updated_at <= ?1
     AND ${sql.anyOf("graph", 2)} ORDER BY updated_at LIMIT ?3`,
  );
  const selectFramesOfTypes = database.prepare(
    `SELECT seq, type, data FROM durable_frames WHERE thread_id = ?1 AND seq > ?2 AND ${sql.anyOf("type", 4)}
     ORDER BY seq LIMIT ?3`,
  );
  // A prefix's counter of open runs (ADR 0127): one more, with the count it makes; one fewer.
  const countOpen = database.prepare(
    `INSERT INTO durable_open_runs (prefix, n) VALUES (?, 1)
     ON CONFLICT (prefix) DO UPDATE SET n = n + 1 RETURNING n`,
  );
  const uncountOpen = database.prepare("UPDATE durable_open_runs SET n = n - ?2 WHERE prefix = ?1");
  const markOpen = database.prepare("UPDATE durable_runs SET open_prefix = ?2 WHERE thread_id = ?1");
  // Each counter beside the open runs stored under its prefix, counted again.
  const recountOpen = database.prepare(
    `SELECT prefix, sum(counter) AS counter, sum(recounted) AS recounted FROM (
       SELECT prefix, n AS counter, 0 AS recounted FROM durable_open_runs
       UNION ALL SELECT open_prefix, 0, count(*) FROM durable_runs
       WHERE open_prefix IS NOT NULL AND status IN ('running', 'paused') GROUP BY open_prefix)
     GROUP BY prefix ORDER BY prefix`,
  );
  // Paused runs' expiries due by ?1, soonest first, after (?4, ?5) in that order (the expiring-runs index).
  const selectExpiring = database.prepare(
    `SELECT thread_id, expires_at FROM durable_runs WHERE status = 'paused' AND expires_at IS NOT NULL
     AND expires_at <= ?1 AND ${sql.anyOf("graph", 2)} AND (expires_at, thread_id) > (?4, ?5)
     ORDER BY expires_at, thread_id LIMIT ?3`,
  );
  /** One UPDATE per set of patched columns, prepared on first use. */
  const patchUpdates = new Map<string, StatementSync>();
  return {
    patchUpdates,
    insertRun,
    selectRun,
    selectOpenPrefix,
    upsertJournal,
    insertFrame,
    selectJournal,
    selectFrames,
    selectLastSeq,
    selectThreads,
    deleteRun,
    deleteJournal,
    deleteFrames,
    selectStale,
    selectSilent,
    selectFramesOfTypes,
    countOpen,
    uncountOpen,
    markOpen,
    recountOpen,
    selectExpiring,
  };
}
