/** Starts a private `nats-server` (JetStream on) on a free port; suites may stop and restart it. */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./free-port.ts";
import { signalProcess } from "./signal-process.ts";

export interface NatsServerHandle {
  readonly port: number;
  readonly url: string;
  /** Stops the server (SIGTERM, then SIGKILL); the JetStream store is kept for a restart. */
  stop(): Promise<void>;
  /** Starts it again on the same port and store. */
  restart(): Promise<void>;
  /**
   * Sends the running server a signal: `SIGSTOP` freezes it (what clients write waits unread in its
   * sockets; resolves once it is stopped), `SIGKILL` then loses it all. Follow a kill with `stop()`
   * before `restart()`.
   */
  signal(signal: NodeJS.Signals): Promise<void>;
  /** Stops it and deletes its store. */
  close(): Promise<void>;
}

const installCommand = "apt-get install -y nats-server (or run scripts/ensure-services.sh)";

/**
 * Where to look for nats-server: only `NATS_SERVER_BIN` when it is set (a wrong path must fail, not
 * fall back to another binary), else PATH and the Debian locations.
 */
export function natsServerCandidates(env: NodeJS.ProcessEnv = process.env): readonly string[] {
  const explicit = env.NATS_SERVER_BIN;
  if (explicit !== undefined && explicit !== "") return [explicit];
  return ["nats-server", "/usr/sbin/nats-server", "/usr/bin/nats-server"];
}

/** The first candidate that runs; else an error carrying the install command. */
export function findNatsServer(candidates: readonly string[] = natsServerCandidates()): string {
  for (const candidate of candidates) {
    try {
      execFileSync(candidate, ["--version"], { stdio: "ignore" });
      return candidate;
    } catch {}
  }
  throw new Error(`nats-server not found (tried ${candidates.join(", ")}). Install it: ${installCommand}`);
}

export async function startNatsServer(
  /** `jetstream: false` starts a server without JetStream (default on). */
  options: { extraArgs?: readonly string[]; jetstream?: boolean } = {},
): Promise<NatsServerHandle> {
  const binary = findNatsServer();
  const port = await freePort();
  const storeDir = mkdtempSync(join(tmpdir(), "tackle-nats-"));
  let child: ChildProcess | undefined;

  async function start(): Promise<void> {
    const args = [
      "-a",
      "127.0.0.1",
      "-p",
      String(port),
      ...(options.jetstream === false ? [] : ["-js", "-sd", storeDir]),
      ...(options.extraArgs ?? []),
    ];
    const spawned = spawn(binary, args, { stdio: ["ignore", "ignore", "pipe"] });
    child = spawned;
    let stderr = "";
    spawned.stderr?.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    const deadline = Date.now() + 10_000;
    while (!(await canConnect(port))) {
      if (spawned.exitCode !== null) throw new Error(`nats-server exited (${spawned.exitCode}): ${stderr}`);
      if (Date.now() > deadline) throw new Error(`nats-server did not listen on ${port}: ${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  async function stop(): Promise<void> {
    const running = child;
    child = undefined;
    if (running === undefined || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once("exit", resolve));
    running.kill("SIGTERM");
    const timer = setTimeout(() => running.kill("SIGKILL"), 3000);
    await exited;
    clearTimeout(timer);
  }

  await start();
  return {
    port,
    url: `nats://127.0.0.1:${port}`,
    stop,
    restart: start,
    async signal(signal) {
      if (child === undefined || child.exitCode !== null) throw new Error("nats-server is not running");
      await signalProcess(child, signal);
    },
    async close() {
      await stop();
      rmSync(storeDir, { recursive: true, force: true });
    },
  };
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}
