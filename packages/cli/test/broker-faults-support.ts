/**
 * The processes and clients of `broker-faults.property.test.ts`: a nats-server of its own, a TCP relay
 * in front of it for each process, `tackle serve` (console and node of the `effects` module, whose `apply` appends a
 * line per run to a file) and `tackle mcp` over stdio, each on the broker through its relay, and MCP
 * SDK clients: a 2025 session and a session-less 2026-07-28 client over HTTP, and the stdio one.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type CallToolResult, Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import {
  freePort,
  type NatsServerHandle,
  startNatsServer,
  startTcpRelay,
  type TcpRelay,
  underLoadMs,
} from "@tackle/test-support";
import { cleanEnv, mainScript, type ServeProcess, startServe, tempHome } from "./tackle-process.ts";

/** The console's places per credential and `tackle mcp`'s (no waiting line): a leaked one shows. */
export const maxInFlight = 8;
const effectsBundle = fileURLToPath(new URL("./fixtures/remote-effects.mjs", import.meta.url));

export interface NamedClient {
  readonly name: string;
  readonly client: Client;
}

export interface Cluster {
  readonly nats: NatsServerHandle;
  /** The relay in front of the broker for `tackle serve` (console and node). */
  readonly relay: TcpRelay;
  /** The relay in front of the broker for `tackle mcp`. */
  readonly stdioRelay: TcpRelay;
  readonly serve: ServeProcess;
  readonly clients: readonly NamedClient[];
  readonly effectsFile: string;
  /** The lines `effects.apply` appended, by call id. */
  effects(): Map<string, number>;
  close(): Promise<void>;
}

async function httpClient(url: string, token: string, mode: "legacy" | { pin: "2026-07-28" }) {
  const client = new Client({ name: "broker-faults", version: "0.1.0" }, { versionNegotiation: { mode } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

export async function startCluster(): Promise<Cluster> {
  const home = tempHome();
  const effectsFile = join(home.path, "effects");
  const nats = await startNatsServer();
  const relay = await startTcpRelay(nats.url);
  const stdioRelay = await startTcpRelay(nats.url);
  const env = {
    MESH_BROKER_URL: relay.url,
    TACKLE_HOME: home.path,
    MESH_NODE: "front",
    MESH_TOOL_MODULES: `effects=${effectsBundle}`,
  };
  const stdio = new Client({ name: "broker-faults-stdio", version: "0.1.0" });
  // Both processes start at once: each strips the workspace's TypeScript, slow under load.
  const [serve] = await Promise.all([
    startServe(
      ["--max-in-flight", String(maxInFlight)],
      cleanEnv({ ...env, MESH_CONSOLE_LISTEN: `127.0.0.1:${await freePort()}` }),
    ),
    stdio.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [
          "--conditions=@tackle/source",
          mainScript,
          "mcp",
          ...["--max-in-flight", String(maxInFlight), "--max-waiting", "0"],
        ],
        env: cleanEnv({ ...env, MESH_BROKER_URL: stdioRelay.url }) as Record<string, string>,
        stderr: "pipe",
      }),
      { timeout: underLoadMs(60_000) },
    ),
  ]);
  const token = readFileSync(serve.tokenFile ?? "", "utf8").trim();
  const clients: NamedClient[] = [
    { name: "session", client: await httpClient(serve.url, token, "legacy") },
    { name: "sessionless", client: await httpClient(serve.url, token, { pin: "2026-07-28" }) },
    { name: "stdio", client: stdio },
  ];
  for (const { client } of clients) client.onerror = () => {};
  return {
    nats,
    relay,
    stdioRelay,
    serve,
    clients,
    effectsFile,
    effects() {
      const counts = new Map<string, number>();
      let text = "";
      try {
        text = readFileSync(effectsFile, "utf8");
      } catch {}
      for (const line of text.split("\n")) {
        const id = line.split(" ")[0];
        if (id) counts.set(id, (counts.get(id) ?? 0) + 1);
      }
      return counts;
    },
    async close() {
      await Promise.all(clients.map(({ client }) => client.close().catch(() => undefined)));
      await serve.stop("SIGKILL");
      await relay.close();
      await stdioRelay.close();
      await nats.close();
      home.remove();
    },
  };
}

/** What one `effects.apply` call came to, as its client saw it. */
export type Answer =
  | { readonly kind: "ok" }
  | { readonly kind: "error"; readonly code: string; readonly text: string; readonly data: unknown }
  | { readonly kind: "aborted" }
  | { readonly kind: "thrown"; readonly message: string };

/** Reads an `effects.apply` result: its own id back, or the coded error it carries. */
export function answerOf(result: CallToolResult, id: string): Answer {
  const content = result.structuredContent as
    | { id?: string; error?: { code?: string; message?: string; data?: unknown } }
    | undefined;
  const text = result.content.map((block) => (block.type === "text" ? block.text : "")).join("");
  if (result.isError !== true) {
    if (content?.id !== id) return { kind: "thrown", message: `answered another call: ${text}` };
    return { kind: "ok" };
  }
  return {
    kind: "error",
    code: String(content?.error?.code),
    text,
    data: content?.error?.data,
  };
}
