/** Runs `tackle` as a real process from source, the way `npm start` and the tests' users run it. */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import { freePort, underLoadMs } from "@tackle/test-support";

export const mainScript = fileURLToPath(new URL("../src/main.ts", import.meta.url));
export const binScript = fileURLToPath(new URL("../bin/tackle.js", import.meta.url));
export const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));

export interface Finished {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** An environment without the caller's MESH_* / TACKLE_* settings, plus the given ones. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("MESH_") && !key.startsWith("TACKLE_") && key !== "NODE_OPTIONS") env[key] = value;
  }
  // Never the user's ~/.tackle: built-in modules write stores and tokens there.
  return { ...env, TACKLE_LOG_LEVEL: "warn", TACKLE_HOME: suiteHome(), ...extra };
}

let sharedHome: string | undefined;
function suiteHome(): string {
  if (sharedHome === undefined) {
    const path = mkdtempSync(join(tmpdir(), "tackle-home-"));
    sharedHome = path;
    process.once("exit", () => rmSync(path, { recursive: true, force: true }));
  }
  return sharedHome;
}

export function tempHome(): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), "tackle-home-"));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

export function runTackle(
  args: readonly string[],
  options: {
    env?: NodeJS.ProcessEnv;
    input?: string;
    command?: readonly string[];
    timeoutMs?: number;
    cwd?: string;
  } = {},
): Promise<Finished> {
  const command = options.command ?? [process.execPath, "--conditions=@tackle/source", mainScript];
  return new Promise((resolve, reject) => {
    const child = spawn(command[0]!, [...command.slice(1), ...args], {
      env: options.env ?? cleanEnv(),
      stdio: ["pipe", "pipe", "pipe"],
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    // A node start strips the workspace's TypeScript: ~25 s at load 30 on 2 cores, so scaled by load.
    const limitMs = underLoadMs(options.timeoutMs ?? 30_000);
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`tackle ${args.join(" ")} did not finish in ${limitMs} ms; stderr: ${stderr}`));
    }, limitMs);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(options.input ?? "");
  });
}

export interface ServeProcess {
  readonly child: ChildProcess;
  /** Everything `tackle serve` printed on stdout before it was ready. */
  readonly banner: string;
  readonly url: string;
  readonly tokenFile: string | undefined;
  stderr(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * A console-only front node on a mesh (`front`, serving just the whoami fixture), for tests that reach
 * another node's tools through its console; `mesh` holds the broker URL and the home directory.
 */
export async function startFrontConsole(mesh: Record<string, string>): Promise<ServeProcess> {
  const whoami = fileURLToPath(new URL("./fixtures/whoami-bundle.ts", import.meta.url));
  return startServe(
    [],
    cleanEnv({
      ...mesh,
      MESH_NODE: "front",
      MESH_TOOL_MODULES: `whoami=${whoami}`,
      MESH_CONSOLE_LISTEN: `127.0.0.1:${await freePort()}`,
    }),
  );
}

/** Starts `tackle serve …` and waits for its banner (`console <url>`, or the module list with --no-console). */
export function startServe(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  ready: RegExp = /^token file (.+)$/m,
  options: { readonly viaNpmStart?: boolean } = {},
): Promise<ServeProcess> {
  // `npm start` exactly as the README says, from the repository root; its own group, so stop reaches node.
  const child = options.viaNpmStart
    ? spawn("npm", ["start", "--silent"], {
        cwd: repoRoot,
        env,
        stdio: ["ignore", "pipe", "pipe"],
        detached: true,
      })
    : spawn(process.execPath, ["--conditions=@tackle/source", mainScript, "serve", ...args], {
        env,
        stdio: ["ignore", "pipe", "pipe"],
      });
  let stdout = "";
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
    if (child.exitCode === null && child.signalCode === null) {
      if (options.viaNpmStart && child.pid !== undefined) process.kill(-child.pid, signal);
      else child.kill(signal);
    }
    return exited;
  };
  const readyMs = underLoadMs(30_000);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void stop("SIGKILL");
      reject(
        new Error(`tackle serve did not get ready in ${readyMs} ms; stdout: ${stdout}; stderr: ${stderr}`),
      );
    }, readyMs);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(
        new Error(
          `tackle serve exited with ${code} before it was ready; stdout: ${stdout}; stderr: ${stderr}`,
        ),
      );
    });
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
      if (!ready.test(stdout)) return;
      clearTimeout(timer);
      resolve({
        child,
        banner: stdout,
        url: /^console (\S+)$/m.exec(stdout)?.[1] ?? "",
        tokenFile: /^token file (.+)$/m.exec(stdout)?.[1],
        stderr: () => stderr,
        stop,
      });
    });
  });
}

/**
 * `tackle call slow.wait {"ms": ms}` (the `slow` module of `fixtures/slow-bundle.mjs`) on the broker at
 * `brokerUrl`, with a 30 s time limit: resolves once its request is on the tool's subject (a bystander
 * sees it go out, as the node reads it; 30 s at most on a quiet machine, scaled by load), with the call
 * still running.
 */
export async function slowCallSent(
  brokerUrl: string,
  home: string,
  ms: number,
): Promise<{ readonly call: Promise<Finished> }> {
  const spy = await connect({ servers: brokerUrl });
  try {
    const sent = new Promise<void>((resolve) => {
      spy.subscribe("tackle.tools.slow.wait", { max: 1, callback: () => resolve() });
    });
    await spy.flush();
    const call = runTackle(["call", "slow.wait", JSON.stringify({ ms }), "--timeout", "30000"], {
      env: cleanEnv({ MESH_BROKER_URL: brokerUrl, TACKLE_HOME: home }),
      timeoutMs: 60_000,
    });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      sent,
      new Promise((_, reject) => {
        const sentMs = underLoadMs(30_000);
        timer = setTimeout(() => reject(new Error(`tackle call sent no request in ${sentMs} ms`)), sentMs);
      }),
    ]).finally(() => clearTimeout(timer));
    return { call };
  } finally {
    await spy.close();
  }
}
