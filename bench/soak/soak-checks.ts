/** What the soak finds at the end: each acknowledged effect present, once (or inside a stated window). */
import { createDocumentClient, interpretDocument, timelineSchema } from "@tackle/docscript";
import { LoroDoc } from "loro-crdt";
import type pg from "pg";
import type { Op } from "./soak-model.ts";
import { toolsPerRun, turnsPerJob } from "./soak-processes.ts";

export async function checkDocuments(
  { origin, token, documentId }: { origin: string; token: string; documentId: string },
  captions: ReadonlyMap<string, Op>,
): Promise<void> {
  // Documents: every acknowledged caption is in the document, once.
  const reader = new LoroDoc();
  await createDocumentClient({ origin, token }).pullInto(documentId, reader);
  const texts = interpretDocument(reader, timelineSchema)
    .entities.filter((entity) => entity.entityKind === "caption")
    .map((entity) => String(entity.payload.text));
  const counts = new Map<string, number>();
  for (const text of texts) counts.set(text, (counts.get(text) ?? 0) + 1);
  for (const [text, op] of captions) {
    const count = counts.get(text) ?? 0;
    if (count === 0) op.outcome = "lost";
    op.duplicated = Math.max(0, count - 1);
  }
}

/** Marks lost and duplicated runs; answers how many runs around each fault another runner took over. */
export async function checkDurable(
  durableSql: pg.Pool,
  runIds: ReadonlyMap<string, Op>,
  runnerPid: number | undefined,
  notes: string[],
): Promise<(fault: number) => number> {
  // Durable: every completed run has each of its tools' effects; an effect present twice is inside
  // the crash window when each extra execution came with a takeover of its run (a run_recovered
  // frame) and the next attempt number, as durable states it; any other is a duplicate outside it.
  const effects = await durableSql.query<{ key: string; attempts: number[]; pids: number[] }>(
    "SELECT idempotency_key AS key, array_agg(attempt ORDER BY at) AS attempts, array_agg(pid ORDER BY at) AS pids FROM soak_tool_effects GROUP BY idempotency_key",
  );
  const recovered = new Map(
    (
      await durableSql.query<{ run_id: string; n: number }>(
        `SELECT r.run_id, count(f.*)::int AS n FROM durable_runs r
           LEFT JOIN durable_frames f ON f.thread_id = r.thread_id AND f.type = 'run_recovered'
         GROUP BY r.run_id`,
      )
    ).rows.map((row) => [row.run_id, row.n]),
  );
  const keysPerRun = new Map<string, number>();
  let firstByKilledRunner = 0;
  let windowDuplicates = 0;
  for (const row of effects.rows) {
    const runId = row.key.slice(0, row.key.indexOf(":"));
    keysPerRun.set(runId, (keysPerRun.get(runId) ?? 0) + 1);
    const op = runIds.get(runId);
    const extra = row.attempts.length - 1;
    if (op === undefined || extra === 0) continue;
    const increasing = row.attempts.every(
      (attempt, index) => index === 0 || attempt > (row.attempts[index - 1] as number),
    );
    if (increasing && extra <= (recovered.get(runId) ?? 0)) {
      op.crashWindow += extra;
      windowDuplicates += extra;
      if (row.pids[0] === runnerPid) firstByKilledRunner += 1;
    } else op.duplicated += extra;
  }
  for (const [runId, op] of runIds) {
    if (op.outcome === "ok" && (keysPerRun.get(runId) ?? 0) < toolsPerRun) op.outcome = "lost";
  }
  const takenOver = (index: number) =>
    [...recovered].filter(([runId, n]) => n > 0 && runIds.get(runId)?.fault === index).length;
  notes.push(
    `durable: runs taken over by another runner (run_recovered): ${takenOver(3)} around the runner SIGKILL, ${takenOver(5)} around the PostgreSQL restart; ${windowDuplicates} tool effects ran again inside the crash window, ${firstByKilledRunner} of them first run by the SIGKILLed runner`,
  );
  return takenOver;
}

/** Marks lost and duplicated adds and import jobs; answers the jobs' final rows by id. */
export async function checkMemory(
  memorySql: pg.Pool,
  added: ReadonlyMap<string, { op: Op; memoryId: string }>,
  jobs: ReadonlyMap<string, { op: Op; tag: string }>,
  notes: string[],
): Promise<Map<string, { status: string; lease_owner: string }>> {
  // Memory: every acknowledged add's memory exists; no text is held by two active memories of one
  // kind (a turn is kept as an episode beside the fact mined from it: two kinds, ADR 0361); every
  // succeeded import job stored each of its turns once and no memory twice.
  const memories = await memorySql.query<{ id: string; kind: string; content: string; status: string }>(
    "SELECT id, kind, content, status FROM memory_memories",
  );
  const ids = new Set(memories.rows.map((row) => row.id));
  const activeContents = new Map<string, { content: string; count: number }>();
  for (const row of memories.rows) {
    if (row.status !== "active") continue;
    const key = `${row.kind}\u0000${row.content}`;
    const seen = activeContents.get(key);
    activeContents.set(key, { content: row.content, count: (seen?.count ?? 0) + 1 });
  }
  const duplicatedContents = [...activeContents.values()]
    .filter(({ count }) => count > 1)
    .map(({ content, count }) => [content, count] as const);
  for (const [tag, { op, memoryId }] of added) {
    if (!ids.has(memoryId)) op.outcome = "lost";
    for (const [content, count] of duplicatedContents) if (content.includes(tag)) op.duplicated += count - 1;
  }
  const events = await memorySql.query<{ content: string; n: number }>(
    "SELECT content, count(*)::int AS n FROM memory_events GROUP BY content",
  );
  for (const { op, tag } of jobs.values()) {
    const own = events.rows.filter((row) => row.content.includes(tag));
    if (op.outcome === "ok" && own.length < turnsPerJob) op.outcome = "lost";
    op.duplicated += own.reduce((total, row) => total + row.n - 1, 0);
    for (const [content, count] of duplicatedContents) if (content.includes(tag)) op.duplicated += count - 1;
  }
  const finals = new Map(
    (await memorySql.query("SELECT id, status, lease_owner FROM memory_jobs")).rows.map((row) => [
      row.id,
      row,
    ]),
  );
  for (const [id, { op }] of jobs) {
    if (op.outcome !== "lost") continue;
    const row = (
      await memorySql.query(
        "SELECT status, lease_owner, lease_until > clock_timestamp() AS leased, started_at, (SELECT count(*)::int FROM memory_events e WHERE e.import_job_id = j.id) AS events FROM memory_jobs j WHERE id = $1",
        [id],
      )
    ).rows[0];
    notes.push(`memory: import job ${id} never ended: ${JSON.stringify(row)}`);
  }
  return finals;
}
