/** A commit to the durable SQLite store: the run's patch, journal records and frames. */
import type { DatabaseSync } from "node:sqlite";
import type { CommitBatch } from "../../store/durable-store.ts";
import { patchColumns, runFenced } from "../run-row.ts";
import type { DurableStatements } from "./sqlite-statements.ts";

/**
 * Applies a commit inside the caller's transaction: the run's patch (fenced by `ownerCheck` when
 * given), then its journal records and frames. A fenced-out owner writes nothing.
 */
export function applyBatch(
  database: DatabaseSync,
  statements: DurableStatements,
  threadId: string,
  batch: CommitBatch,
  ownerCheck: string | undefined,
): void {
  const { upsertJournal, insertFrame, patchUpdates } = statements;
  const patch: Record<string, string | number | null> = {
    ...batch.run,
    updated_at: new Date().toISOString(),
  };
  const keys = Object.keys(patch).sort();
  const sqlKey = `${keys.join(",")}|${ownerCheck === undefined ? "" : "owner"}`;
  let update = patchUpdates.get(sqlKey);
  if (update === undefined) {
    const sets = keys.map((key) => `${patchColumns[key as keyof typeof patchColumns] ?? "updated_at"} = ?`);
    update = database.prepare(
      `UPDATE durable_runs SET ${sets.join(", ")} WHERE thread_id = ?${ownerCheck === undefined ? "" : " AND owner = ?"}`,
    );
    patchUpdates.set(sqlKey, update);
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
