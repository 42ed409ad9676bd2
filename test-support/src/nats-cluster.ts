/**
 * A NATS cluster on loopback: N `nats-server` processes joined by routes, JetStream clustered (so KV
 * buckets can be replicated, R3 on three servers). Suites kill, stop and restart single servers.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./free-port.ts";
import { findNatsServer } from "./nats-server.ts";
import { signalProcess } from "./signal-process.ts";

export interface NatsClusterServer {
  readonly name: string;
  readonly port: number;
  readonly url: string;
  /** Its monitoring endpoint (`/healthz`, `/jsz`, `/routez`). */
  readonly monitorUrl: string;
  /** True while its process runs. */
  running(): boolean;
  /** SIGKILL: no goodbye to clients or routes. */
  kill(): Promise<void>;
  /**
   * Sends its process a signal: `SIGSTOP` freezes it (what reaches it waits unread; resolves once it is
   * stopped), `kill()` then loses it.
   */
  signal(signal: NodeJS.Signals): Promise<void>;
  /** SIGTERM (lame-duck free), then SIGKILL after 3 s. */
  stop(): Promise<void>;
  /** Starts it again on the same ports and store; resolves when it reports healthy. */
  restart(): Promise<void>;
}

export interface NatsClusterHandle {
  readonly servers: readonly NatsClusterServer[];
  /** Every client URL, comma-separated (what `MESH_BROKER_URL` takes). */
  readonly urls: string;
  /** Resolves when every running server reports JetStream healthy. */
  healthy(timeoutMs?: number): Promise<void>;
  /** Stops every server and deletes their stores. */
  close(): Promise<void>;
}

interface Spec {
  readonly name: string;
  readonly port: number;
  readonly routePort: number;
  readonly monitorPort: number;
  readonly storeDir: string;
}

/**
 * Starts the cluster; when a server exits while the cluster comes up (a port that `freePort` found free
 * was taken by another suite before the server bound it), starts it again on new ports, three times at most.
 */
export async function startNatsCluster(options: { size?: number } = {}): Promise<NatsClusterHandle> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startNatsClusterOnce(options);
    } catch (error) {
      if (attempt >= 3 || !(error as Error).message.startsWith("nats-server exited")) throw error;
    }
  }
}

async function startNatsClusterOnce(options: { size?: number }): Promise<NatsClusterHandle> {
  const binary = findNatsServer();
  const size = options.size ?? 3;
  const root = mkdtempSync(join(tmpdir(), "tackle-nats-cluster-"));
  const clusterName = `tackle-${process.pid}-${Date.now().toString(36)}`;
  const specs: Spec[] = [];
  for (let index = 0; index < size; index++) {
    specs.push({
      name: `n${index + 1}`,
      port: await freePort(),
      routePort: await freePort(),
      monitorPort: await freePort(),
      storeDir: join(root, `n${index + 1}`),
    });
  }
  const routes = specs.map((spec) => `nats://127.0.0.1:${spec.routePort}`).join(",");

  const servers = specs.map((spec): NatsClusterServer & { start(): Promise<void> } => {
    let child: ChildProcess | undefined;
    let stderr = "";
    const server = {
      name: spec.name,
      port: spec.port,
      url: `nats://127.0.0.1:${spec.port}`,
      monitorUrl: `http://127.0.0.1:${spec.monitorPort}`,
      running: () => child !== undefined && child.exitCode === null && child.signalCode === null,
      async start() {
        const args = [
          ["-n", spec.name],
          ["-a", "127.0.0.1"],
          ["-p", String(spec.port)],
          ["-m", String(spec.monitorPort)],
          ["-js"],
          ["-sd", spec.storeDir],
          ["--cluster_name", clusterName],
          ["--cluster", `nats://127.0.0.1:${spec.routePort}`],
          ["--routes", routes],
        ].flat();
        const spawned = spawn(binary, args, { stdio: ["ignore", "ignore", "pipe"] });
        child = spawned;
        spawned.stderr?.on("data", (chunk: Buffer) => {
          stderr = (stderr + chunk.toString()).slice(-4000);
        });
      },
      async signal(signal: NodeJS.Signals) {
        if (child === undefined || !server.running())
          throw new Error(`nats-server ${spec.name} is not running`);
        await signalProcess(child, signal);
      },
      async kill() {
        const running = child;
        if (running === undefined || running.exitCode !== null || running.signalCode !== null) return;
        const exited = new Promise((resolve) => running.once("exit", resolve));
        running.kill("SIGKILL");
        await exited;
      },
      async stop() {
        const running = child;
        if (running === undefined || running.exitCode !== null || running.signalCode !== null) return;
        const exited = new Promise((resolve) => running.once("exit", resolve));
        running.kill("SIGTERM");
        const timer = setTimeout(() => running.kill("SIGKILL"), 3000);
        await exited;
        clearTimeout(timer);
      },
      async restart() {
        await server.start();
        await waitHealthy(
          spec.monitorPort,
          20_000,
          () => stderr,
          () => server.running(),
        );
      },
    };
    return server;
  });

  async function healthy(timeoutMs = 30_000): Promise<void> {
    await Promise.all(
      servers.map((server, index) =>
        server.running()
          ? waitHealthy((specs[index] as Spec).monitorPort, timeoutMs, () => "", server.running)
          : undefined,
      ),
    );
  }

  const handle: NatsClusterHandle = {
    servers,
    urls: servers.map((server) => server.url).join(","),
    healthy,
    async close() {
      await Promise.all(servers.map((server) => server.stop()));
      rmSync(root, { recursive: true, force: true });
    },
  };
  try {
    for (const server of servers) await server.start();
    await healthy();
  } catch (error) {
    await handle.close();
    throw error;
  }
  return handle;
}

/** Polls the monitoring `/healthz` (JetStream current and a meta leader known) until it answers 200. */
async function waitHealthy(
  monitorPort: number,
  timeoutMs: number,
  stderr: () => string,
  running: () => boolean,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    if (!running()) throw new Error(`nats-server exited: ${stderr()}`);
    try {
      const response = await fetch(`http://127.0.0.1:${monitorPort}/healthz`, {
        signal: AbortSignal.timeout(1000),
      });
      last = await response.text();
      if (response.ok) return;
    } catch (error) {
      last = (error as Error).message;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(
    `nats-server (monitor ${monitorPort}) not healthy after ${timeoutMs} ms: ${last} ${stderr()}`,
  );
}
