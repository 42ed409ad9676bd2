/**
 * The row codec every durable store shares: a run's row and its record, the columns a patch may set,
 * the insert's column order, and the errors a store gives (fenced, exists, unknown), worded once.
 */
import { DurableError } from "../errors/durable-error.ts";
import type { RunPatch, RunRecord, RunStatus } from "../store/durable-store.ts";

/** A `durable_runs` row, as both SQL stores read it. */
export interface RunRow {
  thread_id: string;
  run_id: string;
  graph: string;
  status: string;
  state: string;
  node: string | null;
  cursor: string;
  interrupts: string;
  error: string | null;
  owner: string;
  created_at: string;
  updated_at: string;
  /** The prefix whose open-runs counter holds the run while it is open, or null (ADR 0127). */
  open_prefix?: string | null;
}

/** The column each field of a run patch sets. */
export const patchColumns = {
  runId: "run_id",
  graph: "graph",
  status: "status",
  state: "state",
  node: "node",
  cursor: "cursor",
  interrupts: "interrupts",
  error: "error",
  owner: "owner",
  expiresAt: "expires_at",
} as const satisfies Record<keyof RunPatch | "owner", string>;

/** The insert's columns, in the order of `runValues`. */
export const runColumns =
  "thread_id, run_id, graph, status, state, node, cursor, interrupts, error, owner, created_at, updated_at";

/** A record's values in the order of `runColumns`. */
export function runValues(record: RunRecord): (string | null)[] {
  return [
    record.threadId,
    record.runId,
    record.graph,
    record.status,
    record.state,
    record.node,
    record.cursor,
    record.interrupts,
    record.error,
    record.owner,
    record.createdAt,
    record.updatedAt,
  ];
}

export function fromRow(row: RunRow): RunRecord {
  return {
    threadId: row.thread_id,
    runId: row.run_id,
    graph: row.graph,
    status: row.status as RunStatus,
    state: row.state,
    node: row.node,
    cursor: row.cursor,
    interrupts: row.interrupts,
    error: row.error,
    owner: row.owner,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function runFenced(threadId: string): DurableError {
  return new DurableError("run_fenced", `Thread "${threadId}" was taken over by another runner`);
}

export function threadExists(threadId: string, cause?: unknown): DurableError {
  return new DurableError(
    "thread_exists",
    `Thread "${threadId}" already has a run`,
    cause === undefined ? {} : { cause },
  );
}

export function unknownRun(threadId: string): DurableError {
  return DurableError.notFound("run", threadId, `No run for thread "${threadId}"`);
}
