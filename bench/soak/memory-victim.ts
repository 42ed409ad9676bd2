/**
 * The memory service fault's kill, landed while the victim holds an import job, and the jobs it left.
 *
 * A leased job's `lease_owner` names its process (`host:pid:random`, packages/memory's job runner), and
 * each service process connects under its own `application_name`, so the soak can tell which jobs the
 * victim held and when nothing of it can still reach the database. The victim is stopped (SIGSTOP) at
 * an instant it holds a job; once no statement of it is running, the look is repeated, and the kill
 * follows only if it still holds one (else it is let go on and looked at again). The kill is then
 * followed until every backend of the victim is gone: a statement it sent just before the stop may
 * still have been on its way (even the one finishing its job); a job it finished so is not one it left.
 */
import type { ChildProcess } from "node:child_process";
import type pg from "pg";
import { sleep, until } from "./soak-model.ts";
import { kill } from "./soak-processes.ts";

export interface HeldJob {
  readonly id: string;
  readonly lease_owner: string;
}

export interface MemoryVictim {
  readonly process: ChildProcess;
  /** The `application_name` its connections carry. */
  readonly application: string;
}

/** The pid a leased job's owner names (`host:pid:random`), or undefined for another format. */
export function ownerPid(owner: string | null | undefined): string | undefined {
  const parts = owner?.split(":") ?? [];
  return parts.length >= 3 ? parts.at(-2) : undefined;
}

/** The running jobs whose lease names `pid`. */
async function heldBy(sql: pg.Pool, pid: number): Promise<HeldJob[]> {
  const running = await sql.query<HeldJob>(
    "SELECT id, lease_owner FROM memory_jobs WHERE status = 'running' AND lease_owner IS NOT NULL",
  );
  return running.rows.filter((row) => ownerPid(row.lease_owner) === String(pid));
}

/** True once no backend of `application` is in `states` (none at all when `states` is undefined). */
function quiet(sql: pg.Pool, application: string, states?: string[]) {
  return async () => {
    const backends = await sql.query<{ state: string | null }>(
      "SELECT state FROM pg_stat_activity WHERE application_name = $1",
      [application],
    );
    const left = backends.rows.filter((row) => states === undefined || states.includes(row.state ?? ""));
    return left.length === 0 ? true : undefined;
  };
}

/** Does the victim hold a running import job now (the fault's wait before the kill)? */
export async function victimHolds(sql: pg.Pool, victim: MemoryVictim): Promise<boolean> {
  const pid = victim.process.pid;
  return pid !== undefined && (await heldBy(sql, pid)).length > 0;
}

/**
 * SIGKILLs the victim at an instant it holds a job (looking for one up to `lookMs`, then killing it
 * anyway), and answers the jobs it held that nothing of it can finish any more, with what was seen.
 */
export async function killHoldingJob(
  sql: pg.Pool,
  victim: MemoryVictim,
  lookMs: number,
): Promise<{ held: HeldJob[]; note: string }> {
  const pid = victim.process.pid;
  if (pid === undefined) throw new Error("the memory service has no pid");
  const deadline = Date.now() + lookMs;
  let looks = 0;
  let seen: HeldJob[];
  for (;;) {
    looks += 1;
    victim.process.kill("SIGSTOP");
    // A statement sent before the stop still runs (a renewal, the finish of its job): let it land.
    await sleep(50);
    await until(quiet(sql, victim.application, ["active"]), 10_000);
    seen = await heldBy(sql, pid);
    if (seen.length > 0 || Date.now() > deadline) break;
    victim.process.kill("SIGCONT");
    await sleep(100);
  }
  await kill(victim.process);
  // Every backend of the victim gone: what it sent is done, and nothing more of it will come. A job
  // seen held that it finished all the same (a statement on its way when it stopped) is not left to
  // anyone; one another process claimed meanwhile (the victim's lease ran out while it was stopped) is.
  const gone = await until(quiet(sql, victim.application), 30_000);
  const finals = await sql.query<{ id: string; status: string; lease_owner: string | null }>(
    "SELECT id, status, lease_owner FROM memory_jobs WHERE id = ANY($1)",
    [seen.map((job) => job.id)],
  );
  const finishedByVictim = new Set(
    finals.rows
      .filter((row) => row.status !== "running" && ownerPid(row.lease_owner) === String(pid))
      .map((row) => row.id),
  );
  const held = seen.filter((job) => !finishedByVictim.has(job.id));
  return {
    held,
    note: `memory: pid ${pid} SIGKILLed after ${looks} look(s) while stopped, holding ${seen.length} running job(s), ${finishedByVictim.size} of them finished by it all the same${gone ? "" : " (some of its backends still there 30 s after the kill)"}`,
  };
}
