/**
 * The fault-injection soak: mixed load on two machines' worth of loopback processes — mesh calls over
 * a three-server NATS cluster to two node processes, document pushes through two document server
 * processes on a private PostgreSQL — while it SIGKILLs and restarts a NATS server, a mesh node
 * and a document server, then stops and starts that PostgreSQL. Counts every operation: succeeded, failed and reported, lost (an
 * acknowledged effect missing, or an operation that never settled), duplicated; latency per phase.
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
import { createMeshClient, issueMembership, openMeshBuckets } from "@tackle/mesh";
import { startNatsCluster } from "@tackle/test-support";
import { LoroDoc } from "loro-crdt";

const root = new URL("../../", import.meta.url);
const nodeScript = fileURLToPath(new URL("packages/mesh/test/fixtures/node-process.ts", root));
const bundle = fileURLToPath(new URL("packages/mesh/test/fixtures/whoami.ts", root));
const documentServerScript = fileURLToPath(
  new URL("packages/docscript/test/two-servers/server-child.ts", root),
);
const adminToken = "soak-admin-token-0123456789";

export interface SoakRow {
  readonly workload: string;
  readonly fault: string;
  readonly attempted: number;
  readonly succeeded: number;
  /** Failed with an error the caller saw (retryable or not). */
  readonly failedReported: number;
  /** Never settled within its deadline, or acknowledged but missing at the end. */
  readonly lost: number;
  readonly duplicated: number;
  readonly p50: Record<Phase, number>;
  readonly p99: Record<Phase, number>;
}

type Phase = "before" | "during" | "after";

interface Op {
  readonly phase: Phase;
  readonly ok: boolean;
  readonly ms: number;
}

function spawnReady(script: string, args: string[]): Promise<{ process: ChildProcess; line: string }> {
  const child = spawn(process.execPath, ["--conditions=@tackle/source", script, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
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
async function startPrivatePostgres(): Promise<{
  url: string;
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
  const serverOptions = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
  const start = () =>
    run("pg_ctl", ["-D", data, "-o", serverOptions, "-l", join(dir, "log"), "-w", "-t", "60", "start"]);
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
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
  child.kill("SIGKILL");
  return exited;
}

const percentile = (values: number[], p: number) => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
};

function summarize(workload: string, fault: string, ops: Op[], lost: number, duplicated: number): SoakRow {
  const byPhase = (phase: Phase) => ops.filter((op) => op.phase === phase).map((op) => op.ms);
  const phases: Phase[] = ["before", "during", "after"];
  return {
    workload,
    fault,
    attempted: ops.length,
    succeeded: ops.filter((op) => op.ok).length,
    failedReported: ops.filter((op) => !op.ok).length,
    lost,
    duplicated,
    p50: Object.fromEntries(phases.map((phase) => [phase, percentile(byPhase(phase), 50)])) as Record<
      Phase,
      number
    >,
    p99: Object.fromEntries(phases.map((phase) => [phase, percentile(byPhase(phase), 99)])) as Record<
      Phase,
      number
    >,
  };
}

/** Runs each fault for `phaseMs` before, during and after; returns one row per workload and fault. */
export async function runSoak(options: { phaseMs?: number } = {}): Promise<SoakRow[]> {
  const phaseMs = options.phaseMs ?? 5000;
  const rows: SoakRow[] = [];
  const cleanup: (() => Promise<void>)[] = [];
  try {
    // --- the mesh: a NATS cluster, R3 buckets, two node processes serving one bundle
    const cluster = await startNatsCluster({ size: 3 });
    cleanup.push(() => cluster.close());
    const client = await createMeshClient({ servers: cluster.urls, timeoutMs: 3000 });
    cleanup.push(() => client.close());
    await openMeshBuckets(client.connection, { replicas: 3 });
    const urls = cluster.servers.map((server) => server.url);
    const startNode = (name: string, order: string[]) =>
      spawnReady(nodeScript, [name, order.join(","), "pool", bundle]).then((started) => {
        cleanup.push(() => kill(started.process));
        return started.process;
      });
    for (const node of ["soak-a", "soak-b"])
      await issueMembership(client.connection, { node, module: "pool" });
    let nodeA = await startNode("soak-a", urls);
    await startNode("soak-b", [...urls.slice(1), urls[0] as string]);

    // --- documents: two servers on a private PostgreSQL (restarted by fault 4)
    const database = await startPrivatePostgres();
    cleanup.push(() => database.close());
    const startDocs = () =>
      spawnReady(documentServerScript, [database.url, adminToken]).then((started) => {
        cleanup.push(() => kill(started.process));
        return { process: started.process, url: started.line.split(" ")[1] as string };
      });
    let docsA = await startDocs();
    const docsB = await startDocs();
    const documentId = "soak-doc";
    const token = "soak-token-0123456789abcdef";
    await createDocumentClient({ origin: docsA.url, token }).createDocument(documentId, {
      adminToken,
      token,
    });

    let phase: Phase = "before";
    let stop = false;

    // Mesh load: four callers; an op is lost if it does not settle within its deadline plus slack.
    const meshOps: Op[] = [];
    let meshLost = 0;
    const meshLoad = Array.from({ length: 4 }, async () => {
      while (!stop) {
        const started = performance.now();
        const at = phase;
        const settled = await Promise.race([
          client.call("pool.whoami", {}).then((result) => result.ok),
          new Promise<"hung">((resolve) => setTimeout(() => resolve("hung"), 3000 + 1000 + 2000)),
        ]);
        if (settled === "hung") meshLost += 1;
        else meshOps.push({ phase: at, ok: settled, ms: performance.now() - started });
        if (settled !== true) await new Promise((resolve) => setTimeout(resolve, 50));
      }
    });

    // Document load: two writers, one per server, each push a caption with a unique text.
    const docOps: Op[] = [];
    const acknowledged = new Set<string>();
    let writerSeq = 0;
    const writer = (server: () => string, peer: number) =>
      (async () => {
        while (!stop) {
          const origin = server();
          const doc = new LoroDoc();
          doc.setPeerId(peer * 1_000_000 + writerSeq);
          const text = `caption ${peer}-${writerSeq++}`;
          const started = performance.now();
          const at = phase;
          try {
            const documents = createDocumentClient({ origin, token, userId: `w${peer}` });
            await documents.pullInto(documentId, doc);
            const before = doc.oplogVersion();
            openDocument(doc, timelineSchema).entities.create({ entityKind: "caption", payload: { text } });
            doc.commit();
            const result = await documents.push(documentId, doc.export({ mode: "update", from: before }));
            const ok = result.status === "committed";
            if (ok) acknowledged.add(text);
            docOps.push({ phase: at, ok, ms: performance.now() - started });
          } catch {
            docOps.push({ phase: at, ok: false, ms: performance.now() - started });
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
        }
      })();
    let docsAUrl = docsA.url;
    const docLoad = [writer(() => docsAUrl, 1), writer(() => docsB.url, 2)];

    const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    const runFault = async (fault: () => Promise<void>, recover: () => Promise<void>) => {
      phase = "before";
      await wait(phaseMs);
      phase = "during";
      await fault();
      await wait(phaseMs);
      await recover();
      phase = "after";
      await wait(phaseMs);
    };
    const marks = () => ({ mesh: meshOps.length, docs: docOps.length, meshLost });

    // 1. A NATS server SIGKILLed, then restarted.
    let from = marks();
    const victim = cluster.servers[0];
    if (victim === undefined) throw new Error("no NATS server");
    await runFault(
      () => victim.kill(),
      () => victim.restart(),
    );
    rows.push(
      summarize(
        "mesh calls",
        "NATS server SIGKILL + restart",
        meshOps.slice(from.mesh),
        meshLost - from.meshLost,
        0,
      ),
    );
    rows.push(summarize("document pushes", "NATS server SIGKILL + restart", docOps.slice(from.docs), 0, 0));

    // 2. A mesh node SIGKILLed, then started again.
    from = marks();
    await runFault(
      () => kill(nodeA),
      async () => {
        nodeA = await startNode("soak-a", urls);
      },
    );
    rows.push(
      summarize(
        "mesh calls",
        "mesh node SIGKILL + restart",
        meshOps.slice(from.mesh),
        meshLost - from.meshLost,
        0,
      ),
    );
    rows.push(summarize("document pushes", "mesh node SIGKILL + restart", docOps.slice(from.docs), 0, 0));

    // 3. A document server SIGKILLed, then started again.
    from = marks();
    await runFault(
      () => kill(docsA.process),
      async () => {
        docsA = await startDocs();
        docsAUrl = docsA.url;
      },
    );
    const afterDocumentServer = { mesh: meshOps.slice(from.mesh), meshLost: meshLost - from.meshLost };
    const documentServerDocs = docOps.slice(from.docs);

    // 4. PostgreSQL stopped (fast: its connections are cut), down for a phase, then started again.
    from = marks();
    await runFault(
      () => database.stop(),
      () => database.start(),
    );
    stop = true;
    await Promise.all([...meshLoad, ...docLoad]);

    // Every acknowledged caption is in the document, once.
    const reader = new LoroDoc();
    await createDocumentClient({ origin: docsB.url, token }).pullInto(documentId, reader);
    const texts = interpretDocument(reader, timelineSchema)
      .entities.filter((entity) => entity.entityKind === "caption")
      .map((entity) => String(entity.payload.text));
    const counts = new Map<string, number>();
    for (const text of texts) counts.set(text, (counts.get(text) ?? 0) + 1);
    const missing = [...acknowledged].filter((text) => !counts.has(text)).length;
    const duplicated = [...counts.values()].filter((count) => count > 1).length;
    rows.push(
      summarize(
        "mesh calls",
        "document server SIGKILL + restart",
        afterDocumentServer.mesh,
        afterDocumentServer.meshLost,
        0,
      ),
    );
    rows.push(summarize("document pushes", "document server SIGKILL + restart", documentServerDocs, 0, 0));
    rows.push(
      summarize("mesh calls", "PostgreSQL restart", meshOps.slice(from.mesh), meshLost - from.meshLost, 0),
    );
    // Lost and duplicated captions are counted over the whole run, on the last row.
    rows.push(
      summarize("document pushes", "PostgreSQL restart", docOps.slice(from.docs), missing, duplicated),
    );
    return rows;
  } finally {
    for (const step of cleanup.reverse()) await step().catch(() => undefined);
  }
}

export function formatTable(rows: readonly SoakRow[]): string {
  const ms = (value: number) => (Number.isNaN(value) ? "–" : value.toFixed(0));
  const lines = [
    "| workload | fault | attempted | succeeded | failed, reported | lost | duplicated | p50 ms before / during / after | p99 ms before / during / after |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
  ];
  for (const row of rows) {
    lines.push(
      `| ${row.workload} | ${row.fault} | ${row.attempted} | ${row.succeeded} | ${row.failedReported} | ${row.lost} | ${row.duplicated} | ${ms(row.p50.before)} / ${ms(row.p50.during)} / ${ms(row.p50.after)} | ${ms(row.p99.before)} / ${ms(row.p99.during)} / ${ms(row.p99.after)} |`,
    );
  }
  return lines.join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const seconds = Number(process.argv[2] ?? 5);
  const rows = await runSoak({ phaseMs: seconds * 1000 });
  process.stdout.write(`${formatTable(rows)}\n`);
  process.exit(0);
}
