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
import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { chownSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { createDocumentClient, interpretDocument, openDocument, timelineSchema } from "@tackle/docscript";
import { MemoryClient } from "@tackle/memory";
import { createMeshClient, issueMembership, openMeshBuckets } from "@tackle/mesh";
import { startNatsCluster } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";
import pg from "pg";

const root = new URL("../../", import.meta.url);
const nodeScript = fileURLToPath(new URL("packages/mesh/test/fixtures/node-process.ts", root));
const bundle = fileURLToPath(new URL("packages/mesh/test/fixtures/whoami.ts", root));
const documentServerScript = fileURLToPath(
  new URL("packages/docscript/test/two-servers/server-child.ts", root),
);
const durableRunnerScript = fileURLToPath(new URL("./durable-runner.ts", import.meta.url));
const memoryServiceScript = fileURLToPath(new URL("packages/memory/test/support/service-child.ts", root));
const adminToken = "soak-admin-token-0123456789";
/** The durable runners' lease and the memory services' job lease (both judged by PostgreSQL's clock). */
const durableLeaseMs = 2000;
const memoryJobLeaseMs = 1500;
/** Tools per durable run (durable-runner.ts) and turns per memory import job. */
const toolsPerRun = 3;
const turnsPerJob = 30;
/**
 * The mesh callers' time limit per call. A call whose request is lost (published to a node that just
 * died, or through a NATS server that did) gets no answer at all: when the client can name the node
 * that went away with it, it fails `node_lost` within about 3 s of the node's death (its node watch);
 * otherwise the client reports it `timeout` after the limit plus the second it waits for the far
 * side's own timeout error.
 */
const meshTimeoutMs = 3000;
const meshHeldMs = meshTimeoutMs + 1000;

export type Workload =
  | "mesh calls"
  | "document pushes"
  | "durable runs"
  | "memory adds"
  | "memory import jobs";

export interface SoakRow {
  readonly workload: Workload;
  readonly fault: string;
  readonly attempted: number;
  /** Acknowledged, and (for stored effects) found at the end. */
  readonly succeeded: number;
  /** Failed with an error the caller saw (retryable or not). */
  readonly failedReported: number;
  /** Never settled within its deadline, or acknowledged but missing at the end. */
  readonly lost: number;
  /** Effects present more than once outside any stated window. Must be 0. */
  readonly duplicated: number;
  /**
   * Durable only: a tool run again by the process that took its run over, because its outcome had not
   * landed when the run's driver died or lost its database (durable's stated crash window). Undefined
   * for workloads that state no such window.
   */
  readonly duplicatedCrashWindow?: number;
  readonly p50: Record<Phase, number>;
  readonly p99: Record<Phase, number>;
  /** Operations (of any fault) that succeeded after this fault was repaired and before the next one. */
  readonly succeededAfterRepair: number;
}

export interface SoakResult {
  readonly rows: SoakRow[];
  /** Work the killed process had in hand that another process finished. */
  readonly takeovers: {
    /** Durable runs started around the runner SIGKILL that another runner took over (run_recovered). */
    readonly durableRuns: number;
    /** Import jobs the killed memory service held that the other service finished. */
    readonly memoryJobs: number;
  };
  /** What the table does not show: takeovers seen, and how each crash-window duplicate came about. */
  readonly notes: string[];
}

type Phase = "before" | "during" | "after";

/** One operation, counted under the fault and phase it started in; deferred ones settle at the end. */
interface Op {
  readonly fault: number;
  readonly phase: Phase;
  outcome: "ok" | "failed" | "lost";
  ms: number;
  duplicated: number;
  crashWindow: number;
  /** performance.now() when it settled. */
  endedAt: number;
}

/** Processes that exited without the soak killing them, with the end of their stderr. */
const unexpectedExits: string[] = [];
const killedBySoak = new WeakSet<ChildProcess>();

function spawnReady(script: string, args: string[]): Promise<{ process: ChildProcess; line: string }> {
  const child = spawn(process.execPath, ["--conditions=@tackle/source", script, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  child.once("exit", (code, signal) => {
    if (!killedBySoak.has(child))
      unexpectedExits.push(`${script.split("/").pop()} exited (${code ?? signal}): ${stderr.slice(-1500)}`);
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} not ready in 60 s: ${stderr}`)), 60_000);
    lines.on("line", (line) => {
      if (line.startsWith("ready")) {
        clearTimeout(timer);
        resolve({ process: child, line });
      }
    });
    child.once("exit", (code) => reject(new Error(`${script} exited (${code}): ${stderr}`)));
  });
}

/** A free loopback port (closed again before it is used). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0));
    });
  });
}

/**
 * A private PostgreSQL for this run (the shared one is not ours to restart): initdb into a directory
 * under os.tmpdir(), as the `postgres` user when this process is root (initdb refuses root).
 */
export async function startPrivatePostgres(): Promise<{
  url: string;
  /** The URL of another database on the same server. */
  urlOf: (database: string) => string;
  stop: () => Promise<void>;
  start: () => Promise<void>;
  close: () => Promise<void>;
}> {
  const versions = readdirSync("/usr/lib/postgresql").sort((a, b) => Number(b) - Number(a));
  const bin = `/usr/lib/postgresql/${versions[0]}/bin`;
  const dir = mkdtempSync(join(tmpdir(), "tackle-soak-pg-"));
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
    chownSync(dir, uid, gid);
  }
  // Asynchronous: the load in this process keeps running while PostgreSQL stops and starts.
  const run = async (tool: string, args: string[]) => {
    if (asRoot) await promisify(execFile)("runuser", ["-u", "postgres", "--", join(bin, tool), ...args]);
    else await promisify(execFile)(join(bin, tool), args);
  };
  const data = join(dir, "data");
  await run("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]);
  const port = await freePort();
  const serverOptions = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300`;
  const start = () =>
    run("pg_ctl", ["-D", data, "-o", serverOptions, "-l", join(dir, "log"), "-w", "-t", "60", "start"]);
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    urlOf: (database) => `postgres://postgres@127.0.0.1:${port}/${database}`,
    stop: () => run("pg_ctl", ["-D", data, "-m", "fast", "-w", "-t", "60", "stop"]),
    start,
    async close() {
      try {
        await run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "-t", "60", "stop"]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  killedBySoak.add(child);
  child.kill("SIGKILL");
  return exited;
}

const percentile = (values: number[], p: number) => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
};

const phases: Phase[] = ["before", "during", "after"];

function summarize(
  workload: Workload,
  fault: string,
  ops: Op[],
  crashWindow: boolean,
): Omit<SoakRow, "succeededAfterRepair"> {
  // Latency of every operation that settled (succeeded or failed); a lost one has none.
  const byPhase = (phase: Phase) =>
    ops.filter((op) => op.phase === phase && op.outcome !== "lost").map((op) => op.ms);
  const perPhase = (p: number) =>
    Object.fromEntries(phases.map((phase) => [phase, percentile(byPhase(phase), p)])) as Record<
      Phase,
      number
    >;
  const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);
  return {
    workload,
    fault,
    attempted: ops.length,
    succeeded: ops.filter((op) => op.outcome === "ok").length,
    failedReported: ops.filter((op) => op.outcome === "failed").length,
    lost: ops.filter((op) => op.outcome === "lost").length,
    duplicated: sum(ops.map((op) => op.duplicated)),
    ...(crashWindow ? { duplicatedCrashWindow: sum(ops.map((op) => op.crashWindow)) } : {}),
    p50: perPhase(50),
    p99: perPhase(99),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` until it answers, or `timeoutMs` passes (then undefined). */
async function until<T>(check: () => Promise<T | undefined>, timeoutMs: number): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    await sleep(100);
  }
  return undefined;
}

/** A JSON request to a durable runner; a network error comes back as status 0 with its code. */
async function durableRequest(
  base: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown>; code?: string }> {
  try {
    const response = await fetch(`${base}${path}`, {
      method: body === undefined ? "GET" : "POST",
      ...(body === undefined
        ? {}
        : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
      signal: AbortSignal.timeout(15_000),
    });
    return { status: response.status, json: (await response.json()) as Record<string, unknown> };
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause;
    return { status: 0, json: {}, code: cause?.code ?? (error as Error).name };
  }
}

/**
 * Runs each fault for `phaseMs` before, during and after; returns one row per workload and fault.
 * Durable runs and memory jobs still open when the load stops are followed for up to `settleMs`.
 */
export async function runSoak(options: { phaseMs?: number; settleMs?: number } = {}): Promise<SoakResult> {
  const phaseMs = options.phaseMs ?? 5000;
  const settleMs = options.settleMs ?? 60_000;
  const rows: SoakRow[] = [];
  const notes: string[] = [];
  const cleanup: (() => Promise<void>)[] = [];
  const t0 = performance.now();
  const track = (child: ChildProcess) => {
    cleanup.push(() => kill(child));
    return child;
  };
  try {
    // --- the mesh side (NATS, then its nodes) and the PostgreSQL side (initdb, then its services)
    //     start side by side; every process of a side at once.
    const startNode = (name: string, order: string[]) =>
      spawnReady(nodeScript, [name, order.join(","), "pool", bundle]).then((started) =>
        track(started.process),
      );
    const meshSide = (async () => {
      const cluster = await startNatsCluster({ size: 3 });
      cleanup.push(() => cluster.close());
      // R3 buckets, two node processes serving one bundle.
      const client = await createMeshClient({ servers: cluster.urls, timeoutMs: meshTimeoutMs });
      cleanup.push(() => client.close());
      await openMeshBuckets(client.connection, { replicas: 3 });
      const urls = cluster.servers.map((server) => server.url);
      for (const node of ["soak-a", "soak-b"])
        await issueMembership(client.connection, { node, module: "pool" });
      const [nodeA] = await Promise.all([
        startNode("soak-a", urls),
        startNode("soak-b", [...urls.slice(1), urls[0] as string]),
      ]);
      return { cluster, client, urls, nodeA };
    })();

    const databaseSide = (async () => {
      const database = await startPrivatePostgres();
      cleanup.push(() => database.close());
      const admin = new pg.Pool({ connectionString: database.url, max: 2 });
      admin.on("error", () => undefined);
      cleanup.push(() => admin.end());
      await admin.query("CREATE DATABASE soak_durable");
      await admin.query("CREATE DATABASE soak_memory");
      const durableUrl = database.urlOf("soak_durable");
      const memoryUrl = database.urlOf("soak_memory");
      const durableSql = new pg.Pool({ connectionString: durableUrl, max: 2 });
      durableSql.on("error", () => undefined);
      cleanup.push(() => durableSql.end());
      const memorySql = new pg.Pool({ connectionString: memoryUrl, max: 2 });
      memorySql.on("error", () => undefined);
      cleanup.push(() => memorySql.end());
      await durableSql.query(
        "CREATE TABLE soak_tool_effects (idempotency_key TEXT NOT NULL, attempt INTEGER NOT NULL, pid INTEGER NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())",
      );
      // Durable runners and memory services keep their port across a restart: clients list them.
      const runnerPorts = [await freePort(), await freePort()] as const;
      const memoryPorts = [await freePort(), await freePort()] as const;
      const startDocs = () =>
        spawnReady(documentServerScript, [database.url, adminToken]).then((started) => ({
          process: track(started.process),
          url: started.line.split(" ")[1] as string,
        }));
      const startRunner = (port: number) =>
        spawnReady(durableRunnerScript, [durableUrl, String(durableLeaseMs), String(port)]).then(
          (started) => ({ process: track(started.process), url: started.line.split(" ")[1] as string }),
        );
      const startMemory = (port: number) =>
        spawnReady(memoryServiceScript, [memoryUrl, String(memoryJobLeaseMs), String(port)]).then(
          (started) => ({ process: track(started.process), url: started.line.split(" ")[1] as string }),
        );
      const [docsA, docsB, runnerA, runnerB, memoryA, memoryB] = await Promise.all([
        startDocs(),
        startDocs(),
        startRunner(runnerPorts[0]),
        startRunner(runnerPorts[1]),
        startMemory(memoryPorts[0]),
        startMemory(memoryPorts[1]),
      ]);
      return {
        database,
        durableSql,
        memorySql,
        runnerPorts,
        memoryPorts,
        startDocs,
        startRunner,
        startMemory,
        docsA,
        docsB,
        runnerA,
        runnerB,
        memoryA,
        memoryB,
      };
    })();
    // Both sides settle before anything is cleaned up, so no process starts after the cleanup ran.
    const [meshStarted, databaseStarted] = await Promise.allSettled([meshSide, databaseSide]);
    if (meshStarted.status === "rejected") throw meshStarted.reason;
    if (databaseStarted.status === "rejected") throw databaseStarted.reason;
    const { cluster, client, urls } = meshStarted.value;
    let { nodeA } = meshStarted.value;
    const { database, durableSql, memorySql, runnerPorts, memoryPorts, startDocs, startRunner, startMemory } =
      databaseStarted.value;
    let { docsA, runnerA, memoryA } = databaseStarted.value;
    const { docsB, runnerB, memoryB } = databaseStarted.value;
    const documentId = "soak-doc";
    const token = "soak-token-0123456789abcdef";
    await createDocumentClient({ origin: docsA.url, token }).createDocument(documentId, {
      adminToken,
      token,
    });
    const runnerUrls = [runnerA.url, runnerB.url];
    const memory = new MemoryClient({
      baseUrl: [memoryA.url, memoryB.url],
      apiKey: "key-a",
      allowPrivateNetwork: true,
      timeoutMs: 10_000,
    });

    const startedIn = performance.now() - t0;
    let fault = 0;
    let phase: Phase = "before";
    let stop = false;
    const ops: Record<Workload, Op[]> = {
      "mesh calls": [],
      "document pushes": [],
      "durable runs": [],
      "memory adds": [],
      "memory import jobs": [],
    };
    const begin = (workload: Workload) => {
      const op: Op = { fault, phase, outcome: "failed", ms: 0, duplicated: 0, crashWindow: 0, endedAt: 0 };
      ops[workload].push(op);
      return { op, started: performance.now() };
    };
    const settle = (op: Op, started: number) => {
      op.endedAt = performance.now();
      op.ms = op.endedAt - started;
    };

    // Mesh load: four callers, each pausing 5 ms between calls (unpaced, they took most of a core from
    // the processes being restarted); an op is lost if it does not settle within its deadline plus slack.
    // Calls that failed at their deadline are noted with their caller: a lost request holds its caller.
    const meshTimeouts: { fault: number; caller: number }[] = [];
    /** Calls that failed `node_lost`, and when (performance.now()). */
    const meshNodeLost: { fault: number; caller: number; at: number }[] = [];
    const meshLoad = Array.from({ length: 4 }, async (_unused, caller) => {
      while (!stop) {
        const { op, started } = begin("mesh calls");
        const settled = await Promise.race([
          client.call("pool.whoami", {}),
          new Promise<"hung">((resolve) => setTimeout(() => resolve("hung"), meshHeldMs + 2000)),
        ]);
        settle(op, started);
        op.outcome = settled === "hung" ? "lost" : settled.ok ? "ok" : "failed";
        if (settled !== "hung" && !settled.ok && settled.error.code === "timeout")
          meshTimeouts.push({ fault: op.fault, caller });
        if (settled !== "hung" && !settled.ok && settled.error.code === "node_lost")
          meshNodeLost.push({ fault: op.fault, caller, at: op.endedAt });
        await sleep(op.outcome === "ok" ? 5 : 50);
      }
    });

    // Document load: two writers, one per server, each push a caption with a unique text.
    const captions = new Map<string, Op>();
    let writerSeq = 0;
    const writer = (server: () => string, peer: number) =>
      (async () => {
        while (!stop) {
          const origin = server();
          const doc = new LoroDoc();
          doc.setPeerId(peer * 1_000_000 + writerSeq);
          const text = `caption ${peer}-${writerSeq++}`;
          const { op, started } = begin("document pushes");
          try {
            const documents = createDocumentClient({ origin, token, userId: `w${peer}` });
            await documents.pullInto(documentId, doc);
            const before = doc.oplogVersion();
            openDocument(doc, timelineSchema).entities.create({ entityKind: "caption", payload: { text } });
            doc.commit();
            const result = await documents.push(documentId, doc.export({ mode: "update", from: before }));
            settle(op, started);
            if (result.status === "committed") {
              op.outcome = "ok";
              captions.set(text, op);
            }
          } catch {
            settle(op, started);
            await sleep(100);
          }
        }
      })();
    const docLoad = [writer(() => docsA.url, 1), writer(() => docsB.url, 2)];

    // Durable load: three clients, each starting a run on the runners in turn (on the other at once if
    // the connection is refused: nothing was sent) and following it to its end. A run left running by
    // a runner that died or lost its database is taken over with `resume?recover=true`, which the
    // runners refuse (`run_active`) until the run has been silent for the lease.
    const runIds = new Map<string, Op>();
    let runSeq = 0;
    const followRun = async (threadId: string, acknowledged: boolean, first: number, deadline: number) => {
      let target = first;
      let lastRecover = 0;
      let last = "";
      const startedAt = Date.now();
      while (Date.now() < deadline) {
        const read = await durableRequest(runnerUrls[target] as string, `/runs/${threadId}`);
        last = `${read.status} ${read.code ?? JSON.stringify(read.json).slice(0, 200)}`;
        if (read.status === 404) return acknowledged ? "lost" : "failed";
        if (read.status !== 200) {
          target = 1 - target;
          await sleep(200);
          continue;
        }
        if (typeof read.json.runId === "string") runIds.set(read.json.runId, runOp(threadId));
        if (read.json.status === "completed") return "ok";
        if (read.json.status !== "running") return "failed";
        const now = Date.now();
        if (now - startedAt > durableLeaseMs && now - lastRecover > 500) {
          lastRecover = now;
          // Either runner may take it; the one still driving it answers run_active.
          target = 1 - target;
          const taken = await durableRequest(
            runnerUrls[target] as string,
            `/runs/${threadId}/resume?recover=true`,
            { answers: {} },
          );
          last += ` / recover: ${taken.status} ${taken.code ?? JSON.stringify(taken.json).slice(0, 200)}`;
        }
        await sleep(100);
      }
      notes.push(`durable: run ${threadId} never ended; last answers: ${last}`);
      return "lost";
    };
    const runOps = new Map<string, Op>();
    const runOp = (threadId: string) => runOps.get(threadId) as Op;
    const durableLoad = Array.from({ length: 3 }, (_unused, worker) =>
      (async () => {
        while (!stop) {
          const threadId = `soak-run-${worker}-${runSeq++}`;
          const { op, started } = begin("durable runs");
          runOps.set(threadId, op);
          let target = runSeq % 2;
          let answer = await durableRequest(runnerUrls[target] as string, "/runs", {
            graph: "soak",
            threadId,
          });
          if (answer.code === "ECONNREFUSED") {
            target = 1 - target;
            answer = await durableRequest(runnerUrls[target] as string, "/runs", { graph: "soak", threadId });
          }
          if (answer.status >= 400 && answer.status < 500) {
            settle(op, started);
            await sleep(100);
            continue;
          }
          // Acknowledged (201), or unknown (a 5xx or a lost connection: the run may exist).
          op.outcome = await followRun(threadId, answer.status === 201, target, Date.now() + settleMs);
          settle(op, started);
          if (op.outcome !== "ok") await sleep(100);
        }
      })(),
    );

    // Memory load: two writers adding memories with unique texts, two importers each running one
    // import job at a time (so both services hold a job), all through one client listing both services.
    const added = new Map<string, { op: Op; memoryId: string }>();
    let addSeq = 0;
    const adders = Array.from({ length: 2 }, () =>
      (async () => {
        while (!stop) {
          const tag = `soakadd${addSeq++}x`;
          const { op, started } = begin("memory adds");
          try {
            const answer = await memory.add({
              userId: "soak",
              content: `Remember the code word ${tag} for the ${tag.length % 2 ? "north" : "south"} gate.`,
            });
            op.outcome = "ok";
            added.set(tag, { op, memoryId: answer.memory.id });
          } catch {
            await sleep(100);
          }
          settle(op, started);
        }
      })(),
    );
    const jobs = new Map<string, { op: Op; tag: string }>();
    let jobSeq = 0;
    const importers = Array.from({ length: 2 }, () =>
      (async () => {
        while (!stop) {
          const tag = `soakjob${jobSeq++}t`;
          const { op, started } = begin("memory import jobs");
          const messages = Array.from({ length: turnsPerJob }, (_unused, index) => ({
            role: index % 2 === 0 ? "user" : "assistant",
            content:
              index % 2 === 0
                ? `I prefer blend ${tag}${index} for the morning tea.`
                : `Noted, blend ${tag}${index}.`,
          }));
          let jobId: string;
          try {
            const { job } = await memory.importConversations({
              userId: "soak",
              format: "openai",
              infer: true,
              conversations: [{ id: tag, messages }],
            });
            jobId = job.id;
          } catch {
            settle(op, started);
            await sleep(100);
            continue;
          }
          jobs.set(jobId, { op, tag });
          // Followed to its end through the same client (it fails over too); lost if it never ends.
          op.outcome = "lost";
          const deadline = Date.now() + settleMs;
          while (Date.now() < deadline) {
            const status = await memory
              .getJob(jobId)
              .then(({ job }) => job.status)
              .catch(() => "unknown");
            if (status === "succeeded" || status === "failed") {
              op.outcome = status === "succeeded" ? "ok" : "failed";
              break;
            }
            await sleep(150);
          }
          settle(op, started);
        }
      })(),
    );

    // When each fault was injected and repaired: a workload must succeed again between a fault's repair
    // and the next fault (or the end).
    const injectedAt: number[] = [];
    const faultTimes: string[] = [];
    const recoveredAt: number[] = [];
    // A killed process is started again at once: its fault lasts until the new one is up (at least a
    // phase). PostgreSQL stays down for a whole phase before it is started again.
    //
    // A fault that can lose mesh requests (a NATS server or a node SIGKILLed: what was published to
    // it in the moments before its server noticed is gone, and NATS cannot tell the caller) holds each
    // caller it caught until that call's deadline, `meshHeldMs` after the kill. Such a fault's "after"
    // phase lasts until then at least, so that the window in which every workload must succeed again
    // (from the repair to the next fault) holds a phase in which the held callers are free again; a
    // restart quicker than the deadline otherwise leaves that window to callers still held.
    const runFault = async (
      index: number,
      inject: () => Promise<void>,
      recover: () => Promise<void>,
      options: { recoverAtOnce?: boolean; ready?: () => Promise<unknown>; holdsMeshCalls?: boolean } = {},
    ) => {
      fault = index;
      phase = "before";
      await sleep(phaseMs);
      // Wait (bounded) until the victim is busy, so the kill lands mid-run or mid-job.
      if (options.ready) await until(async () => ((await options.ready?.()) ? true : undefined), 5000);
      phase = "during";
      await inject();
      injectedAt[index] = performance.now();
      if (options.recoverAtOnce !== false) await Promise.all([sleep(phaseMs), recover()]);
      else {
        await sleep(phaseMs);
        await recover();
      }
      recoveredAt[index] = performance.now();
      faultTimes.push(((recoveredAt[index] - injectedAt[index]) / 1000).toFixed(1));
      phase = "after";
      const held = options.holdsMeshCalls ? injectedAt[index] + meshHeldMs - performance.now() : 0;
      await sleep(Math.max(phaseMs, held));
    };

    const faults = [
      "NATS server SIGKILL + restart",
      "mesh node SIGKILL + restart",
      "document server SIGKILL + restart",
      "durable runner SIGKILL + restart",
      "memory service SIGKILL + restart",
      "PostgreSQL restart",
    ];

    // 1. A NATS server SIGKILLed, then restarted.
    const victim = cluster.servers[0];
    if (victim === undefined) throw new Error("no NATS server");
    await runFault(
      0,
      () => victim.kill(),
      () => victim.restart(),
      { holdsMeshCalls: true },
    );

    // 2. A mesh node SIGKILLed, then started again.
    await runFault(
      1,
      () => kill(nodeA),
      async () => {
        nodeA = await startNode("soak-a", urls);
      },
      { holdsMeshCalls: true },
    );

    // 3. A document server SIGKILLed, then started again.
    await runFault(
      2,
      () => kill(docsA.process),
      async () => {
        docsA = await startDocs();
      },
    );

    // 4. A durable runner SIGKILLed while it drives a run (a run still running, with one of its tool
    //    effects run by this runner and a tool still to come), then started again on its port.
    const runnerPid = runnerA.process.pid;
    await runFault(
      3,
      () => kill(runnerA.process),
      async () => {
        runnerA = await startRunner(runnerPorts[0]);
      },
      {
        ready: async () =>
          (
            await durableSql.query(
              `SELECT 1 FROM durable_runs r
                 JOIN soak_tool_effects e ON e.idempotency_key LIKE r.run_id || ':%'
               WHERE r.status = 'running'
               GROUP BY r.run_id HAVING bool_or(e.pid = $1) AND count(*) < $2`,
              [runnerPid, toolsPerRun],
            )
          ).rowCount,
      },
    );

    // 5. A memory service SIGKILLed while it holds an import job (both services hold one), then
    //    started again on its port.
    let heldAtKill: { id: string; lease_owner: string }[] = [];
    await runFault(
      4,
      async () => {
        heldAtKill = (await memorySql.query("SELECT id, lease_owner FROM jobs WHERE status = 'running'"))
          .rows;
        await kill(memoryA.process);
      },
      async () => {
        memoryA = await startMemory(memoryPorts[0]);
      },
      {
        ready: async () => {
          const running = await memorySql.query(
            "SELECT DISTINCT lease_owner FROM jobs WHERE status = 'running' AND lease_until > clock_timestamp()",
          );
          return running.rows.length >= 2;
        },
      },
    );

    // 6. PostgreSQL stopped (fast: its connections are cut), down for a phase, then started again.
    await runFault(
      5,
      () => database.stop(),
      () => database.start(),
      { recoverAtOnce: false },
    );
    stop = true;
    const stoppedAt = performance.now();
    await Promise.all([...meshLoad, ...docLoad, ...durableLoad, ...adders, ...importers]);
    notes.push(
      `timing: processes up in ${(startedIn / 1000).toFixed(1)} s, faults ${((stoppedAt - t0 - startedIn) / 1000).toFixed(1)} s, open runs and jobs settled in ${((performance.now() - stoppedAt) / 1000).toFixed(1)} s; each fault's downtime in s: ${faultTimes.join(", ")}`,
    );

    // Documents: every acknowledged caption is in the document, once.
    const reader = new LoroDoc();
    await createDocumentClient({ origin: docsB.url, token }).pullInto(documentId, reader);
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

    // Memory: every acknowledged add's memory exists; no text is held by two active memories of one
    // kind (a turn is kept as an episode beside the fact mined from it: two kinds, ADR 0361); every
    // succeeded import job stored each of its turns once and no memory twice.
    const memories = await memorySql.query<{ id: string; kind: string; content: string; status: string }>(
      "SELECT id, kind, content, status FROM memories",
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
      for (const [content, count] of duplicatedContents)
        if (content.includes(tag)) op.duplicated += count - 1;
    }
    const events = await memorySql.query<{ content: string; n: number }>(
      "SELECT content, count(*)::int AS n FROM events GROUP BY content",
    );
    for (const { op, tag } of jobs.values()) {
      const own = events.rows.filter((row) => row.content.includes(tag));
      if (op.outcome === "ok" && own.length < turnsPerJob) op.outcome = "lost";
      op.duplicated += own.reduce((total, row) => total + row.n - 1, 0);
      for (const [content, count] of duplicatedContents)
        if (content.includes(tag)) op.duplicated += count - 1;
    }
    const finals = new Map(
      (await memorySql.query("SELECT id, status, lease_owner FROM jobs")).rows.map((row) => [row.id, row]),
    );
    for (const [id, { op }] of jobs) {
      if (op.outcome !== "lost") continue;
      const row = (
        await memorySql.query(
          "SELECT status, lease_owner, lease_until > clock_timestamp() AS leased, started_at, (SELECT count(*)::int FROM events e WHERE e.import_job_id = j.id) AS events FROM jobs j WHERE id = $1",
          [id],
        )
      ).rows[0];
      notes.push(`memory: import job ${id} never ended: ${JSON.stringify(row)}`);
    }
    // Mesh: what the two faults that can lose requests held, and how soon calls succeeded after each repair.
    notes.push(
      `mesh: ${[0, 1]
        .map((index) => {
          const timeouts = meshTimeouts.filter((timeout) => timeout.fault === index);
          const callers = new Set(timeouts.map((timeout) => timeout.caller)).size;
          const repaired = recoveredAt[index] as number;
          const first = Math.min(
            ...ops["mesh calls"]
              .filter((op) => op.outcome === "ok" && op.endedAt >= repaired)
              .map((op) => op.endedAt),
          );
          const lost = meshNodeLost.filter((entry) => entry.fault === index);
          const lostAfter = lost.map(
            (entry) => `${((entry.at - (injectedAt[index] as number)) / 1000).toFixed(1)} s`,
          );
          return `${faults[index]}: ${timeouts.length} calls held to their deadline (${callers} of 4 callers), ${lost.length} failed node_lost${lost.length === 0 ? "" : ` (${lostAfter.join(", ")} after the kill)`}, ${Number.isFinite(first) ? `first success ${((first - repaired) / 1000).toFixed(1)} s after the repair` : "no success after the repair"}`;
        })
        .join("; ")}`,
    );
    for (const exit of unexpectedExits) notes.push(`process: ${exit}`);
    const movedJobs = heldAtKill.filter((held) => {
      const now = finals.get(held.id);
      return now?.status === "succeeded" && now.lease_owner !== held.lease_owner;
    }).length;
    notes.push(
      `memory: the two services held ${heldAtKill.length} running import jobs when one was SIGKILLed; ${movedJobs} (the killed one's) finished on the other service after the lease`,
    );

    const workloads: Workload[] = [
      "mesh calls",
      "document pushes",
      "durable runs",
      "memory adds",
      "memory import jobs",
    ];
    faults.forEach((name, index) => {
      const from = recoveredAt[index] as number;
      const to = injectedAt[index + 1] ?? Number.POSITIVE_INFINITY;
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

export function formatTable(rows: readonly SoakRow[]): string {
  const ms = (value: number) => (Number.isNaN(value) ? "–" : value.toFixed(0));
  const lines = [
    "| workload | fault | attempted | succeeded | failed, reported | lost | duplicated (outside) | duplicated (crash window) | p50 ms before / during / after | p99 ms before / during / after |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
  ];
  for (const row of rows) {
    lines.push(
      `| ${row.workload} | ${row.fault} | ${row.attempted} | ${row.succeeded} | ${row.failedReported} | ${row.lost} | ${row.duplicated} | ${row.duplicatedCrashWindow ?? "–"} | ${ms(row.p50.before)} / ${ms(row.p50.during)} / ${ms(row.p50.after)} | ${ms(row.p99.before)} / ${ms(row.p99.during)} / ${ms(row.p99.after)} |`,
    );
  }
  return lines.join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const seconds = Number(process.argv[2] ?? 5);
  const { rows, notes } = await runSoak({ phaseMs: seconds * 1000 });
  process.stdout.write(`${formatTable(rows)}\n\n${notes.join("\n")}\n`);
  process.exit(0);
}
