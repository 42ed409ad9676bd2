/**
 * The console's added latency over a direct mesh call. One `tackle serve` process joins a private
 * nats-server and serves the demo module plus its console; this process calls `demo.echo` directly over
 * NATS (`createMeshClient`) and through the console with MCP clients of both protocol revisions. A second
 * `tackle serve` without a broker gives the embedded console for comparison. A lean JSON-RPC client
 * (keep-alive node:http) beside the SDK clients separates the console's cost from the client's. Calls
 * run back to back, the rows taking turns in rounds.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/cli/console-latency.ts [--calls=2000] [--rounds=5]
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createMeshClient } from "@tackle/mesh";
import { freePort, startNatsServer } from "@tackle/test-support";

const calls = Number(process.argv.find((argument) => argument.startsWith("--calls="))?.split("=")[1] ?? 2000);
const warmup = Math.min(200, calls);
/** Rows take turns in rounds (a slice of each row's calls per round), so a change of load hits all alike. */
const rounds = Number(process.argv.find((argument) => argument.startsWith("--rounds="))?.split("=")[1] ?? 5);
const mainScript = fileURLToPath(new URL("../../packages/cli/src/main.ts", import.meta.url));
const demo = fileURLToPath(new URL("../../packages/cli/src/modules/demo.ts", import.meta.url));
const home = mkdtempSync(join(tmpdir(), "tackle-bench-"));
const cleanups: (() => Promise<unknown> | unknown)[] = [() => rmSync(home, { recursive: true, force: true })];

/** Starts `tackle serve` and resolves with its console URL once it printed its banner. */
async function serve(env: Record<string, string>): Promise<string> {
  const child = spawn(process.execPath, ["--conditions=@tackle/source", mainScript, "serve"], {
    env: {
      PATH: process.env.PATH ?? "",
      TACKLE_HOME: home,
      TACKLE_LOG_LEVEL: "warn",
      MESH_TOOL_MODULES: `demo=${demo}`,
      ...env,
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  cleanups.unshift(() => {
    child.kill("SIGTERM");
    return new Promise((resolve) => child.once("exit", resolve));
  });
  let stdout = "";
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`tackle serve exited with ${code}: ${stdout}`)));
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
      const url = /^console (\S+)$/m.exec(stdout)?.[1];
      if (url !== undefined && /^token file /m.test(stdout)) resolve(url);
    });
  });
}

async function mcpClient(url: string, pin: boolean): Promise<Client> {
  const token = readFileSync(join(home, "console-token"), "utf8").trim();
  const client = new Client(
    { name: "bench", version: "0" },
    { versionNegotiation: { mode: pin ? { pin: "2026-07-28" } : "legacy" } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  cleanups.unshift(() => client.close());
  return client;
}

interface Row {
  readonly name: string;
  readonly samples: number[];
}

interface Subject {
  readonly name: string;
  readonly body: () => Promise<unknown>;
}

async function measureAll(subjects: readonly Subject[]): Promise<Row[]> {
  for (const { body } of subjects) for (let index = 0; index < warmup; index += 1) await body();
  const rows = subjects.map(({ name }) => ({ name, samples: [] as number[] }));
  for (let round = 0; round < rounds; round += 1) {
    for (const [position, { body }] of subjects.entries()) {
      const samples = rows[position]!.samples;
      for (let index = 0; index < Math.ceil(calls / rounds); index += 1) {
        const started = performance.now();
        await body();
        samples.push((performance.now() - started) * 1000);
      }
    }
  }
  for (const row of rows) row.samples.sort((left, right) => left - right);
  return rows;
}

/**
 * A lean JSON-RPC client: one keep-alive connection (node:http), the body as an MCP client sends it,
 * the answer parsed: the console's own cost without an MCP SDK client's.
 */
function rawClient(url: string, revision: "2026-07-28" | "2025-06-18") {
  const token = readFileSync(join(home, "console-token"), "utf8").trim();
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  cleanups.unshift(() => agent.destroy());
  let id = 0;
  return (name: string, args: Record<string, unknown>) =>
    new Promise<{ isError?: boolean }>((resolve, reject) => {
      id += 1;
      const modern = revision === "2026-07-28";
      const body = JSON.stringify({
        jsonrpc: "2.0",
        id,
        method: "tools/call",
        params: {
          name,
          arguments: args,
          ...(modern
            ? {
                _meta: {
                  "io.modelcontextprotocol/protocolVersion": revision,
                  "io.modelcontextprotocol/clientInfo": { name: "bench", version: "0" },
                  "io.modelcontextprotocol/clientCapabilities": {},
                },
              }
            : {}),
        },
      });
      const outgoing = request(
        url,
        {
          method: "POST",
          agent,
          headers: {
            authorization: `Bearer ${token}`,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            "mcp-protocol-version": revision,
            ...(modern ? { "mcp-method": "tools/call", "mcp-name": name } : {}),
          },
        },
        (response) => {
          let text = "";
          response.setEncoding("utf8");
          response.on("data", (chunk: string) => {
            text += chunk;
          });
          response.on("end", () => {
            try {
              const message = JSON.parse(text) as { result?: { isError?: boolean }; error?: unknown };
              if (message.result === undefined) reject(new Error(`no result: ${text}`));
              else resolve(message.result);
            } catch (error) {
              reject(error);
            }
          });
        },
      );
      outgoing.on("error", reject);
      outgoing.end(body);
    });
}

function percentile(sorted: readonly number[], fraction: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))] ?? Number.NaN;
}

try {
  const nats = await startNatsServer();
  cleanups.push(() => nats.close());
  const meshUrl = await serve({
    MESH_BROKER_URL: nats.url,
    MESH_NODE: "bench",
    MESH_CONSOLE_LISTEN: `127.0.0.1:${await freePort()}`,
  });
  const embeddedUrl = await serve({ MESH_CONSOLE_LISTEN: `127.0.0.1:${await freePort()}` });

  const mesh = await createMeshClient({ servers: nats.url });
  cleanups.unshift(() => mesh.close());
  const args = { text: "hello" };
  const check = (result: { ok?: boolean; isError?: boolean | undefined }) => {
    if (result.ok === false || result.isError === true)
      throw new Error(`call failed: ${JSON.stringify(result)}`);
  };
  const modern = await mcpClient(meshUrl, true);
  const legacy = await mcpClient(meshUrl, false);
  const embedded = await mcpClient(embeddedUrl, true);
  const rawModern = rawClient(meshUrl, "2026-07-28");
  const rawLegacy = rawClient(meshUrl, "2025-06-18");
  const rawEmbedded = rawClient(embeddedUrl, "2026-07-28");

  const rows = await measureAll([
    {
      name: "direct mesh call (createMeshClient → NATS → runtime)",
      body: async () => check(await mesh.call("demo.echo", args)),
    },
    {
      name: "console, MCP 2026-07-28, SDK client (HTTP → console → NATS → runtime)",
      body: async () => check(await modern.callTool({ name: "demo.echo", arguments: args })),
    },
    {
      name: "console, MCP 2025 session, SDK client (HTTP → console → NATS → runtime)",
      body: async () => check(await legacy.callTool({ name: "demo.echo", arguments: args })),
    },
    {
      name: "console, 2026-07-28 JSON-RPC, keep-alive node:http (HTTP → console → NATS → runtime)",
      body: async () => check(await rawModern("demo.echo", args)),
    },
    {
      name: "console, 2025 without a session, keep-alive node:http (HTTP → console → NATS → runtime)",
      body: async () => check(await rawLegacy("demo.echo", args)),
    },
    {
      name: "embedded console, MCP 2026-07-28, SDK client (HTTP → console, no NATS)",
      body: async () => check(await embedded.callTool({ name: "demo.echo", arguments: args })),
    },
    {
      name: "embedded console, 2026-07-28 JSON-RPC, keep-alive node:http (HTTP → console, no NATS)",
      body: async () => check(await rawEmbedded("demo.echo", args)),
    },
  ]);
  const baseline = rows[0]!;
  const baseMedian = percentile(baseline.samples, 0.5);
  const lines = [
    `calls per row: ${Math.ceil(calls / rounds) * rounds} sequential in ${rounds} interleaved rounds (after ${warmup} warm-up), Node ${process.versions.node}, ${new Date().toISOString().slice(0, 10)}`,
    "",
    "| path | p50 µs | p90 µs | p99 µs | mean µs | calls/s | p50 vs direct | added p50 µs |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const row of rows) {
    const mean = row.samples.reduce((total, value) => total + value, 0) / row.samples.length;
    const median = percentile(row.samples, 0.5);
    lines.push(
      `| ${row.name} | ${median.toFixed(0)} | ${percentile(row.samples, 0.9).toFixed(0)} | ${percentile(row.samples, 0.99).toFixed(0)} | ${mean.toFixed(0)} | ${(1e6 / mean).toFixed(0)} | ${(median / baseMedian).toFixed(2)}× | ${row === baseline ? "—" : (median - baseMedian).toFixed(0)} |`,
    );
  }
  process.stdout.write(`${lines.join("\n")}\n`);
} finally {
  for (const cleanup of cleanups) await cleanup();
}
