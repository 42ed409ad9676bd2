/**
 * The memory service as its own process (the `tackle-memory serve` bin), for service-process.test.ts:
 * started with a load-scaled wait, and killed on any failed start, so none outlives the test.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { underLoadMs } from "@tackle/test-support";

export const main = fileURLToPath(new URL("../../src/server/main.ts", import.meta.url));
/** Every service process started here (whether it came up or not), for `killAllStarted`. */
const spawned: ChildProcess[] = [];

export interface Running {
  readonly child: ChildProcess;
  readonly url: string;
  /** Resolves with the first line the process writes to stderr that matches. */
  stderrLine(pattern: RegExp, timeoutMs: number): Promise<string>;
}

export async function startService(args: string[], environment: Record<string, string>): Promise<Running> {
  const child = spawn(process.execPath, ["--conditions=@tackle/source", main, "serve", ...args], {
    env: { PATH: process.env.PATH ?? "", ...environment },
    stdio: ["ignore", "pipe", "pipe"],
  });
  spawned.push(child);
  let stderr = "";
  child.stderr?.on("data", (chunk) => {
    stderr += String(chunk);
  });
  const stderrLine = (pattern: RegExp, timeoutMs: number) =>
    new Promise<string>((resolve, reject) => {
      const deadline = Date.now() + timeoutMs;
      const look = () => {
        const line = stderr.split("\n").find((candidate) => pattern.test(candidate));
        if (line !== undefined) return resolve(line);
        if (Date.now() > deadline) return reject(new Error(`no stderr line matched ${pattern}: ${stderr}`));
        setTimeout(look, 20);
      };
      look();
    });
  const lines = createInterface({ input: child.stdout! });
  // A node start with TypeScript stripping takes ~1 s quiet and tens of seconds at load 30: the wait
  // scales by the load. A start that fails (an exit, a bad line, the wait over) kills the child, so
  // a slow start never leaves a service behind the test (the caller only tracks the ones it gets).
  const startMs = underLoadMs(20_000);
  let timer: NodeJS.Timeout | undefined;
  try {
    const url = await new Promise<string>((resolve, reject) => {
      timer = setTimeout(
        () => reject(new Error(`service did not start in ${startMs} ms: ${stderr}`)),
        startMs,
      );
      child.once("exit", (code) => reject(new Error(`service exited with ${code}: ${stderr}`)));
      lines.on("line", (line) => {
        try {
          const parsed = JSON.parse(line) as { listening?: string };
          if (parsed.listening) resolve(parsed.listening);
        } catch {
          reject(new Error(`service wrote a line that is not JSON: ${line}`));
        }
      });
    });
    return { child, url, stderrLine };
  } catch (error) {
    await stop({ child, url: "", stderrLine }, "SIGKILL");
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

export function stop(running: Running, signal: NodeJS.Signals): Promise<number | null> {
  return new Promise((resolve) => {
    if (running.child.exitCode !== null || running.child.signalCode !== null)
      return resolve(running.child.exitCode);
    running.child.once("exit", (code) => resolve(code));
    running.child.kill(signal);
  });
}

/** SIGKILLs every service process started here (the file's last hook). */
export function killAllStarted(): void {
  for (const child of spawned) child.kill("SIGKILL");
}

/** What `serveToExit` saw: the exit code, or `started` for a start that came up (and was killed). */
export interface ServeExit {
  readonly code: number | null | "started";
  readonly stderr: string;
  readonly stdout: string;
}

/** Runs `serve` to its exit, within a deadline; one that comes up instead is killed: `started`. */
export function serveToExit(args: string[], environment: Record<string, string>): Promise<ServeExit> {
  return new Promise<ServeExit>((resolve, reject) => {
    const child = spawn(process.execPath, ["--conditions=@tackle/source", main, "serve", ...args], {
      env: { PATH: process.env.PATH ?? "", ...environment },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    let stdout = "";
    let started = false;
    child.stderr.on("data", (chunk) => {
      stderr += String(chunk);
    });
    child.stdout.on("data", (chunk) => {
      stdout += String(chunk);
      if (!stdout.includes("listening")) return;
      started = true;
      child.kill("SIGKILL");
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`tackle-memory serve did not exit: ${stderr}`));
    }, underLoadMs(60_000));
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code: started ? "started" : code, stderr, stdout });
    });
  });
}
