/** The soak's processes: spawned and awaited, killed on purpose, and its private PostgreSQL. */
import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { chownSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { freePort } from "@tackle/test-support";

const root = new URL("../../", import.meta.url);
export const nodeScript = fileURLToPath(new URL("packages/mesh/test/fixtures/node-process.ts", root));
export const bundle = fileURLToPath(new URL("packages/mesh/test/fixtures/whoami.ts", root));
export const documentServerScript = fileURLToPath(
  new URL("packages/docscript/test/two-servers/server-child.ts", root),
);
export const durableRunnerScript = fileURLToPath(new URL("./durable-runner.ts", import.meta.url));
export const memoryServiceScript = fileURLToPath(
  new URL("packages/memory/test/support/service-child.ts", root),
);
export const adminToken = "soak-admin-token-0123456789";
/** The durable runners' lease and the memory services' job lease (both judged by PostgreSQL's clock). */
export const durableLeaseMs = 2000;
export const memoryJobLeaseMs = 1500;
/** Tools per durable run (durable-runner.ts) and turns per memory import job. */
export const toolsPerRun = 3;
export const turnsPerJob = 30;
/** Processes that exited without the soak killing them, with the end of their stderr. */
export const unexpectedExits: string[] = [];
const killedBySoak = new WeakSet<ChildProcess>();

export function spawnReady(script: string, args: string[]): Promise<{ process: ChildProcess; line: string }> {
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

export function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  killedBySoak.add(child);
  child.kill("SIGKILL");
  return exited;
}

/**
 * The mesh callers' time limit per call. A call whose request is lost (published to a node that just
 * died, or through a NATS server that did) gets no answer at all: when the client can name the node
 * that went away with it, it fails `node_lost` within about 3 s of the node's death (its node watch);
 * otherwise the client reports it `timeout` after the limit plus the second it waits for the far
 * side's own timeout error.
 */
export const meshTimeoutMs = 3000;
export const meshHeldMs = meshTimeoutMs + 1000;
