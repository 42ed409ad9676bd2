/** Shared pieces of the mesh's integration suites: fixture paths, a recording logger, polling. */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { Logger } from "@tackle/core";
import type { MeshConfig, ModuleEntry } from "../src/index.ts";

export function fixture(name: string): string {
  return fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
}

export interface LogLine {
  readonly level: "debug" | "info" | "warn" | "error";
  readonly message: string;
  readonly fields: Record<string, unknown>;
}

/** A logger that keeps every line, so a test can assert what an operator would read. */
export function recordingLogger(): Logger & { readonly lines: LogLine[] } {
  const lines: LogLine[] = [];
  const at =
    (level: LogLine["level"]) =>
    (message: string, fields: Record<string, unknown> = {}) => {
      lines.push({ level, message, fields });
    };
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

export function meshConfig(node: string, brokerUrl: string, modules: readonly ModuleEntry[]): MeshConfig {
  return { node, brokerUrl, modules, consoleListen: { host: "127.0.0.1", port: 0 } };
}

/** Polls until `check` returns a value that is not undefined, or fails naming what it waited for. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out waiting for ${what}${last === undefined ? "" : `: ${(last as Error).message}`}`);
}

/**
 * Starts a node process (`node-process.ts`) serving module `pool` from `whoami.ts` on the broker
 * URLs given (comma-separated), and adds it to `nodes` (for the suite's cleanup); resolves with its
 * pid once it serves.
 */
export async function startPoolNode(
  name: string,
  urls: string,
  nodes: ChildProcess[],
  bundle: { readonly module: string; readonly path: string } = { module: "pool", path: fixture("whoami.ts") },
  /** How long a key's node must be unheard before this node takes the key over (ADR 0228); default 2 s. */
  goneAfterMs?: number,
): Promise<{ process: ChildProcess; pid: number }> {
  const args = [fixture("node-process.ts"), name, urls, bundle.module, bundle.path];
  const child = spawn(
    process.execPath,
    ["--conditions=@tackle/source", ...args, ...(goneAfterMs === undefined ? [] : [String(goneAfterMs)])],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  nodes.push(child);
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const pid = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`node ${name} not ready after 60 s: ${stderr}`)), 60_000);
    lines.on("line", (line) => {
      const match = /^ready (\d+)$/.exec(line);
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    child.once("exit", (code) => reject(new Error(`node ${name} exited (${code}): ${stderr}`)));
  });
  return { process: child, pid };
}
