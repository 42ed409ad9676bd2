/**
 * The fault-injection soak: mixed load on two machines' worth of loopback processes — mesh calls over
 * a three-server NATS cluster to two node processes; document pushes through two document server
 * processes, durable runs on two runner processes and memory adds and import jobs on two memory
 * service processes, all three roles on one private PostgreSQL — while it SIGKILLs and restarts a NATS
 * server, a mesh node, a document server, a durable runner and a memory service, then stops and starts
 * that PostgreSQL. Counts every operation: succeeded, failed and reported, lost (an acknowledged effect
 * missing, or an operation that never settled), duplicated (durable's stated crash window apart);
 * latency per phase.
 *
 * Run: node --conditions=@tackle/source bench/soak/soak.ts [seconds per phase, default 5]
 */
import type { ChildProcess } from "node:child_process";
import { createDocumentClient } from "@tackle/docscript";
import { MemoryClient } from "@tackle/memory";
import { underLoadMs } from "@tackle/test-support";
import { type HeldJob, killHoldingJob, ownerPid, victimHolds } from "./memory-victim.ts";
import { checkDocuments, checkDurable, checkMemory } from "./soak-checks.ts";
import {
  createLoadState,
  documentLoad,
  durableLoad,
  type LoadState,
  memoryLoad,
  meshLoad,
} from "./soak-loads.ts";
import {
  formatTable,
  type Op,
  type SoakResult,
  type SoakRow,
  sleep,
  summarize,
  until,
  type Workload,
} from "./soak-model.ts";
import { adminToken, kill, meshHeldMs, toolsPerRun, unexpectedExits } from "./soak-processes.ts";
import { startSoakProcesses } from "./soak-start.ts";

export { formatTable, type SoakResult, type SoakRow, type Workload } from "./soak-model.ts";
export { startPrivatePostgres } from "./soak-processes.ts";

type Processes = Awaited<ReturnType<typeof startSoakProcesses>>;

/** When each fault was injected and repaired (performance.now()), and each fault's downtime in s. */
interface FaultTiming {
  readonly injectedAt: number[];
  readonly recoveredAt: number[];
  readonly faultTimes: string[];
}

interface FaultContext {
  readonly state: LoadState;
  readonly phaseMs: number;
  readonly timing: FaultTiming;
}

const faults = [
  "NATS server SIGKILL + restart",
  "mesh node SIGKILL + restart",
  "document server SIGKILL + restart",
  "durable runner SIGKILL + restart",
  "memory service SIGKILL + restart",
  "PostgreSQL restart",
];

const workloads: Workload[] = [
  "mesh calls",
  "document pushes",
  "durable runs",
  "memory adds",
  "memory import jobs",
];

/**
 * Runs each fault for `phaseMs` before, during and after; returns one row per workload and fault.
 * Durable runs and memory jobs still open when the load stops are followed for up to `settleMs`.
 */
export async function runSoak(options: { phaseMs?: number; settleMs?: number } = {}): Promise<SoakResult> {
  const phaseMs = options.phaseMs ?? 5000;
  const settleMs = options.settleMs ?? 60_000;
  const cleanup: (() => Promise<void>)[] = [];
  const t0 = performance.now();
  const track = (child: ChildProcess) => {
    cleanup.push(() => kill(child));
    return child;
  };
  try {
    const procs = await startSoakProcesses(track, cleanup);
    const documentId = "soak-doc";
    const token = "soak-token-0123456789abcdef";
    await createDocumentClient({ origin: procs.docsA.url, token }).createDocument(documentId, {
      adminToken,
      token,
    });
    const memory = new MemoryClient({
      baseUrl: [procs.memoryA.url, procs.memoryB.url],
      apiKey: "key-a",
      allowPrivateNetwork: true,
      timeoutMs: 10_000,
    });
    const startedIn = performance.now() - t0;
    const state = createLoadState();
    const { notes, ops } = state;
    const mesh = meshLoad(state, procs.client);
    const documents = documentLoad(state, {
      origins: [() => procs.docsA.url, () => procs.docsB.url],
      token,
      documentId,
    });
    const durable = durableLoad(state, [procs.runnerA.url, procs.runnerB.url], settleMs);
    const memories = memoryLoad(state, memory, settleMs);
    const timing: FaultTiming = { injectedAt: [], recoveredAt: [], faultTimes: [] };
    const { runnerPid, heldAtKill } = await injectFaults({ state, phaseMs, timing }, procs);
    state.stop = true;
    const stoppedAt = performance.now();
    await Promise.all([...mesh.done, ...documents.done, ...durable.done, ...memories.done]);
    notes.push(
      `timing: processes up in ${(startedIn / 1000).toFixed(1)} s, faults ${((stoppedAt - t0 - startedIn) / 1000).toFixed(1)} s, open runs and jobs settled in ${((performance.now() - stoppedAt) / 1000).toFixed(1)} s; each fault's downtime in s: ${timing.faultTimes.join(", ")}`,
    );

    await checkDocuments({ origin: procs.docsB.url, token, documentId }, documents.captions);
    const takenOver = await checkDurable(procs.durableSql, durable.runIds, runnerPid, notes);
    const finals = await checkMemory(procs.memorySql, memories.added, memories.jobs, notes);
    notes.push(meshNote(ops["mesh calls"], mesh, timing));
    for (const exit of unexpectedExits) notes.push(`process: ${exit}`);
    const movedJobs = heldAtKill.filter((held) => {
      const now = finals.get(held.id);
      return now?.status === "succeeded" && now.lease_owner !== held.lease_owner;
    }).length;
    const endings = heldAtKill.map((held) => {
      const now = finals.get(held.id);
      return `${now?.status} by pid ${ownerPid(now?.lease_owner)}`;
    });
    notes.push(
      `memory: the SIGKILLed service held ${heldAtKill.length} running import job(s); ${movedJobs} finished by another process after the lease (${endings.join(", ") || "none held"})`,
    );

    const rows: SoakRow[] = [];
    faults.forEach((name, index) => {
      const from = timing.recoveredAt[index] as number;
      const to = timing.injectedAt[index + 1] ?? Number.POSITIVE_INFINITY;
      for (const workload of workloads)
        rows.push({
          ...summarize(
            workload,
            name,
            ops[workload].filter((op) => op.fault === index),
            workload === "durable runs",
          ),
          succeededAfterRepair: ops[workload].filter(
            (op) => op.outcome === "ok" && op.endedAt >= from && op.endedAt < to,
          ).length,
        });
    });
    return { rows, notes, takeovers: { durableRuns: takenOver(3), memoryJobs: movedJobs } };
  } finally {
    for (const step of cleanup.reverse()) await step().catch(() => undefined);
  }
}

// A killed process is started again at once: its fault lasts until the new one is up (at least a
// phase). PostgreSQL stays down for a whole phase before it is started again.
//
// A fault that can lose mesh requests (a NATS server or a node SIGKILLed: what was published to
// it in the moments before its server noticed is gone, and NATS cannot tell the caller) holds each
// caller it caught until that call's deadline, `meshHeldMs` after the kill. Such a fault's "after"
// phase lasts until then at least, so that the window in which every workload must succeed again
// (from the repair to the next fault) holds a phase in which the held callers are free again; a
// restart quicker than the deadline otherwise leaves that window to callers still held.
async function runFault(
  { state, phaseMs, timing }: FaultContext,
  index: number,
  inject: () => Promise<void>,
  recover: () => Promise<void>,
  options: { recoverAtOnce?: boolean; ready?: () => Promise<unknown>; holdsMeshCalls?: boolean } = {},
): Promise<void> {
  state.fault = index;
  state.phase = "before";
  await sleep(phaseMs);
  // Wait (bounded, longer under load) until the victim is busy, so the kill lands mid-run or mid-job.
  if (options.ready) {
    await until(async () => ((await options.ready?.()) ? true : undefined), underLoadMs(15_000));
  }
  state.phase = "during";
  await inject();
  timing.injectedAt[index] = performance.now();
  if (options.recoverAtOnce !== false) await Promise.all([sleep(phaseMs), recover()]);
  else {
    await sleep(phaseMs);
    await recover();
  }
  timing.recoveredAt[index] = performance.now();
  timing.faultTimes.push(((timing.recoveredAt[index] - timing.injectedAt[index]) / 1000).toFixed(1));
  state.phase = "after";
  const held = options.holdsMeshCalls ? timing.injectedAt[index] + meshHeldMs - performance.now() : 0;
  await sleep(Math.max(phaseMs, held));
}

/** The six faults in turn; answers the SIGKILLed runner's pid and the import jobs held when a memory service was killed. */
async function injectFaults(context: FaultContext, procs: Processes) {
  // 1. A NATS server SIGKILLed, then restarted.
  const victim = procs.cluster.servers[0];
  if (victim === undefined) throw new Error("no NATS server");
  await runFault(
    context,
    0,
    () => victim.kill(),
    () => victim.restart(),
    { holdsMeshCalls: true },
  );

  // 2. A mesh node SIGKILLed, then started again.
  await runFault(
    context,
    1,
    () => kill(procs.nodeA as ChildProcess),
    async () => {
      procs.nodeA = await procs.startNode("soak-a", procs.urls);
    },
    { holdsMeshCalls: true },
  );

  // 3. A document server SIGKILLed, then started again.
  await runFault(
    context,
    2,
    () => kill(procs.docsA.process),
    async () => {
      procs.docsA = await procs.startDocs();
    },
  );

  // 4. A durable runner SIGKILLed while it drives a run (a run still running, with one of its tool
  //    effects run by this runner and a tool still to come), then started again on its port.
  const runnerPid = procs.runnerA.process.pid;
  await runFault(
    context,
    3,
    () => kill(procs.runnerA.process),
    async () => {
      procs.runnerA = await procs.startRunner(procs.runnerPorts[0]);
    },
    {
      ready: async () =>
        (
          await procs.durableSql.query(
            `SELECT 1 FROM durable_runs r
               JOIN soak_tool_effects e ON e.idempotency_key LIKE r.run_id || ':%'
             WHERE r.status = 'running'
             GROUP BY r.run_id HAVING bool_or(e.pid = $1) AND count(*) < $2`,
            [runnerPid, toolsPerRun],
          )
        ).rowCount,
    },
  );

  // 5. A memory service SIGKILLed while it holds an import job, then started again on its port. The
  //    client sends every job to this service first and it claims each one it gets while idle, so it
  //    holds one most of the time; the other service only now and then (it claims a job queued while
  //    this one is busy). Waiting for both to hold one, as this did, waited for the rare case (and
  //    killed at whatever instant when 15 s passed), and a job could end between the look and the kill.
  let heldAtKill: HeldJob[] = [];
  await runFault(
    context,
    4,
    async () => {
      const killed = await killHoldingJob(procs.memorySql, procs.memoryA, underLoadMs(15_000));
      heldAtKill = killed.held;
      context.state.notes.push(killed.note);
    },
    async () => {
      procs.memoryA = await procs.startMemory(procs.memoryPorts[0]);
    },
    { ready: () => victimHolds(procs.memorySql, procs.memoryA) },
  );

  // 6. PostgreSQL stopped (fast: its connections are cut), down for a phase, then started again.
  await runFault(
    context,
    5,
    () => procs.database.stop(),
    () => procs.database.start(),
    { recoverAtOnce: false },
  );
  return { runnerPid, heldAtKill };
}

/** What the two faults that can lose mesh requests held, and how soon calls succeeded after each repair. */
function meshNote(
  calls: readonly Op[],
  { meshTimeouts, meshNodeLost }: Pick<ReturnType<typeof meshLoad>, "meshTimeouts" | "meshNodeLost">,
  { injectedAt, recoveredAt }: FaultTiming,
): string {
  return `mesh: ${[0, 1]
    .map((index) => {
      const timeouts = meshTimeouts.filter((timeout) => timeout.fault === index);
      const callers = new Set(timeouts.map((timeout) => timeout.caller)).size;
      const repaired = recoveredAt[index] as number;
      const first = Math.min(
        ...calls.filter((op) => op.outcome === "ok" && op.endedAt >= repaired).map((op) => op.endedAt),
      );
      const lost = meshNodeLost.filter((entry) => entry.fault === index);
      const lostAfter = lost.map(
        (entry) => `${((entry.at - (injectedAt[index] as number)) / 1000).toFixed(1)} s`,
      );
      return `${faults[index]}: ${timeouts.length} calls held to their deadline (${callers} of 4 callers), ${lost.length} failed node_lost${lost.length === 0 ? "" : ` (${lostAfter.join(", ")} after the kill)`}, ${Number.isFinite(first) ? `first success ${((first - repaired) / 1000).toFixed(1)} s after the repair` : "no success after the repair"}`;
    })
    .join("; ")}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const seconds = Number(process.argv[2] ?? 5);
  const { rows, notes } = await runSoak({ phaseMs: seconds * 1000 });
  process.stdout.write(`${formatTable(rows)}\n\n${notes.join("\n")}\n`);
  process.exit(0);
}
