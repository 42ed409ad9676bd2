/** The durable SQLite store's statements, prepared once per open file. */
import type { DatabaseSync, StatementSync } from "node:sqlite";
import { sqliteDialect as sql } from "@tackle/storage";
import { runColumns } from "../run-row.ts";

export type DurableStatements = ReturnType<typeof prepareStatements>;

export function prepareStatements(database: DatabaseSync) {
  const insertRun = database.prepare(
    `INSERT INTO durable_runs (${runColumns})
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const selectRun = database.prepare("SELECT * FROM durable_runs WHERE thread_id = ?");
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
  const deleteRun = database.prepare("DELETE FROM durable_runs WHERE thread_id = ?");
  const deleteJournal = database.prepare("DELETE FROM durable_journal WHERE thread_id = ?");
  const deleteFrames = database.prepare("DELETE FROM durable_frames WHERE thread_id = ?");
  const selectStale = database.prepare(
    `SELECT thread_id, status FROM durable_runs WHERE ${sql.startsWith("thread_id", 1)} AND updated_at < ?2
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
  // Open runs in a prefix's id range, counted no further than the bound asks (the open-runs index).
  const countOpen = database.prepare(
    `SELECT count(*) AS n FROM (SELECT 1 FROM durable_runs WHERE status IN ('running', 'paused')
     AND thread_id >= ?1 AND thread_id < ?2 LIMIT ?3)`,
  );
  const countOpenAll = database.prepare(
    `SELECT count(*) AS n FROM (SELECT 1 FROM durable_runs WHERE status IN ('running', 'paused') LIMIT ?1)`,
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
    countOpenAll,
    selectExpiring,
  };
}
