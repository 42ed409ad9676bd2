/** The default store: one SQLite file through `node:sqlite`, WAL with a full sync on every commit. */
import type { StatementSync } from "node:sqlite";
import { openMigratedSqlite, sqliteDialect as sql, sqliteTransaction } from "@tackle/storage";
import type {
  CommitBatch,
  DurableStore,
  Frame,
  JournalRecord,
  RunRecord,
  RunStatus,
} from "../../store/durable-store.ts";
import { leaseHeld } from "../../store/durable-store.ts";
import {
  fromRow,
  patchColumns,
  type RunRow,
  runColumns,
  runFenced,
  runValues,
  threadExists,
  unknownRun,
} from "../run-row.ts";
import { sqliteMigrations } from "./migrations.ts";

export interface SqliteStoreOptions {
  /** A file path, or ":memory:". */
  readonly path: string;
  /**
   * `full` (default): every commit is synced to disk, durable across power loss. `normal`: durable
   * across a process crash (SIGKILL), not across power loss; about as fast as the OS cache.
   */
  readonly synchronous?: "full" | "normal";
}

export function createSqliteStore(options: SqliteStoreOptions): DurableStore {
  // Refuses (StorageError "schema_too_new") a file written by a newer version of this store.
  const database = openMigratedSqlite({
    path: options.path,
    synchronous: options.synchronous === "normal" ? "normal" : "full",
    store: "durable",
    migrations: sqliteMigrations,
  });

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
  const updates = new Map<string, StatementSync>();
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

  const transaction = <T>(work: () => T): T => sqliteTransaction(database, work);

  function apply(threadId: string, batch: CommitBatch, ownerCheck: string | undefined): void {
    const patch: Record<string, string | null> = { ...batch.run, updated_at: new Date().toISOString() };
    const keys = Object.keys(patch).sort();
    const sqlKey = `${keys.join(",")}|${ownerCheck === undefined ? "" : "owner"}`;
    let update = updates.get(sqlKey);
    if (update === undefined) {
      const sets = keys.map((key) => `${patchColumns[key as keyof typeof patchColumns] ?? "updated_at"} = ?`);
      update = database.prepare(
        `UPDATE durable_runs SET ${sets.join(", ")} WHERE thread_id = ?${ownerCheck === undefined ? "" : " AND owner = ?"}`,
      );
      updates.set(sqlKey, update);
    }
    const parameters = [...keys.map((key) => patch[key] ?? null), threadId];
    if (ownerCheck !== undefined) parameters.push(ownerCheck);
    const changed = update.run(...parameters).changes;
    if (changed === 0) {
      throw runFenced(threadId);
    }
    for (const record of batch.journal ?? []) {
      upsertJournal.run(threadId, record.key, record.name, record.state, record.attempt, record.value);
    }
    for (const frame of batch.frames ?? []) {
      insertFrame.run(threadId, frame.seq, frame.type, JSON.stringify(frame.data ?? null));
    }
  }

  return {
    async createRun(record: RunRecord, batch: CommitBatch = {}) {
      transaction(() => {
        try {
          insertRun.run(...runValues(record));
        } catch (error) {
          if (/UNIQUE|PRIMARY KEY/.test((error as Error).message)) {
            throw threadExists(record.threadId, error);
          }
          throw error;
        }
        apply(record.threadId, batch, record.owner);
      });
    },
    async getRun(threadId) {
      const row = selectRun.get(threadId) as RunRow | undefined;
      return row === undefined ? undefined : fromRow(row);
    },
    async claimRun(threadId, owner, fromStatus: readonly RunStatus[], batch = {}, options = {}) {
      return transaction(() => {
        const row = selectRun.get(threadId) as RunRow | undefined;
        if (row === undefined) throw unknownRun(threadId);
        if (!fromStatus.includes(row.status as RunStatus)) return undefined;
        // One file on one machine: the processes sharing it share its clock.
        const silentForMs = Date.now() - Date.parse(row.updated_at);
        const lease = options.staleAfterMs ?? 0;
        if (lease > 0 && silentForMs < lease) throw leaseHeld(threadId, silentForMs, lease);
        apply(threadId, { ...batch, run: { ...batch.run, owner } }, row.owner);
        const run = fromRow(selectRun.get(threadId) as unknown as RunRow);
        const lastSeq = Number((selectLastSeq.get(threadId) as { seq: number }).seq);
        return { run, lastSeq };
      });
    },
    async commit(threadId, owner, batch) {
      transaction(() => apply(threadId, batch, owner));
    },
    async readJournal(threadId) {
      return (selectJournal.all(threadId) as unknown as JournalRecord[]).map((row) => ({
        key: row.key,
        name: row.name,
        state: row.state,
        attempt: Number(row.attempt),
        value: row.value,
      }));
    },
    async readFrames(threadId, afterSeq, limit = 1000, types): Promise<Frame[]> {
      const rows = (
        types === undefined
          ? selectFrames.all(threadId, afterSeq, limit)
          : selectFramesOfTypes.all(threadId, afterSeq, limit, sql.list(types) as string)
      ) as { seq: number; type: string; data: string }[];
      return rows.map((row) => ({ seq: Number(row.seq), type: row.type, data: JSON.parse(row.data) }));
    },
    async listThreads(query = {}) {
      const rows = selectThreads.all(
        query.prefix ?? "",
        query.after ?? "",
        query.limit ?? 100,
      ) as unknown as RunRow[];
      return rows.map(fromRow);
    },
    async deleteThread(threadId) {
      return transaction(() => {
        deleteJournal.run(threadId);
        deleteFrames.run(threadId);
        return deleteRun.run(threadId).changes > 0;
      });
    },
    async findStaleRuns(query) {
      // One file on one machine: the processes sharing it share its clock.
      const before = new Date(Date.now() - query.staleAfterMs).toISOString();
      const rows = selectSilent.all(before, sql.list(query.graphs) as string, query.limit) as {
        thread_id: string;
      }[];
      return rows.map((row) => row.thread_id);
    },
    async pruneThreads(query) {
      return transaction(() => {
        const stale = selectStale.all(query.prefix ?? "", query.updatedBefore, query.limit ?? -1) as {
          thread_id: string;
          status: string;
        }[];
        const pruned: string[] = [];
        for (const row of stale) {
          if (!query.statuses.includes(row.status as RunStatus)) continue;
          deleteJournal.run(row.thread_id);
          deleteFrames.run(row.thread_id);
          deleteRun.run(row.thread_id);
          pruned.push(row.thread_id);
        }
        return pruned;
      });
    },
    async close() {
      if (database.isOpen) database.close();
    },
  };
}
