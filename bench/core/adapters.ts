/**
 * What a Tackle call costs: `toolset.call` against a direct function call, and what each adapter adds
 * on top, all in one run. Prints a markdown table with ratios to the direct call and to `toolset.call`.
 *
 *   node_modules/.bin/node --conditions=@tackle/source bench/core/adapters.ts [--seconds=1]
 */
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport, type Transport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { toAiSdkTools } from "@tackle/core/ai-sdk";
import { toLangChainTools } from "@tackle/core/langchain";
import { serveMcpHttp, serveMcpStdio } from "@tackle/core/mcp";
import { runChatToolCalls } from "@tackle/core/openai";
import { add, addInput, benchToolSet } from "./bench-tool.ts";

const seconds = Number(
  process.argv.find((argument) => argument.startsWith("--seconds="))?.split("=")[1] ?? 1,
);
const input = { a: 2, b: 3 };

interface Case {
  readonly name: string;
  readonly body: () => unknown;
}

interface Row {
  readonly name: string;
  readonly meanMicroseconds: number;
}

/** Mean latency of `body` run back to back for `milliseconds`, in batches so clock reads stay out. */
async function meanMicroseconds(body: () => unknown, milliseconds: number): Promise<number> {
  let operations = 0;
  const started = performance.now();
  const until = started + milliseconds;
  while (performance.now() < until) {
    for (let index = 0; index < 16; index += 1) await body();
    operations += 16;
  }
  return ((performance.now() - started) * 1000) / operations;
}

async function connectMcp(transport: Transport, pin: boolean): Promise<Client> {
  const client = new Client(
    { name: "bench", version: "0.1.0" },
    { versionNegotiation: { mode: pin ? { pin: "2026-07-28" } : "legacy" } },
  );
  await client.connect(transport);
  return client;
}

const cases: Case[] = [];
const cleanups: (() => Promise<void>)[] = [];
cases.push({ name: "direct function call", body: () => add(input) });
cases.push({ name: "direct call + zod parse", body: () => add(addInput.parse(input)) });
cases.push({ name: "toolset.call", body: () => benchToolSet.call("math.add", input) });

const aiSdkTool = toAiSdkTools(benchToolSet).math__add;
cases.push({
  name: "AI SDK tool execute",
  body: () => aiSdkTool?.execute?.(input, { toolCallId: "bench", messages: [], context: {} }),
});

const chatMessage = {
  tool_calls: [
    { id: "bench", type: "function" as const, function: { name: "math__add", arguments: '{"a":2,"b":3}' } },
  ],
};
cases.push({
  name: "OpenAI runChatToolCalls (1 call)",
  body: () => runChatToolCalls(benchToolSet, chatMessage),
});

const [langChainTool] = toLangChainTools(benchToolSet);
const toolCall = { type: "tool_call" as const, id: "bench", name: "math__add", args: input };
cases.push({ name: "LangChain tool.invoke(ToolCall)", body: () => langChainTool?.invoke(toolCall) });

for (const pin of [false, true]) {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const served = serveMcpStdio(benchToolSet, { transport: serverSide });
  const client = await connectMcp(clientSide, pin);
  cases.push({
    name: `MCP in-memory callTool (${client.getNegotiatedProtocolVersion()})`,
    body: () => client.callTool({ name: "math.add", arguments: input }),
  });
  cleanups.push(async () => {
    await client.close();
    await served.close();
  });
}

const child = fileURLToPath(new URL("./stdio-server.ts", import.meta.url));
for (const pin of [false, true]) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ["--conditions=@tackle/source", child],
    stderr: "inherit",
  });
  const client = await connectMcp(transport, pin);
  cases.push({
    name: `MCP stdio child callTool (${client.getNegotiatedProtocolVersion()})`,
    body: () => client.callTool({ name: "math.add", arguments: input }),
  });
  cleanups.push(() => client.close());
}

const http = await serveMcpHttp(benchToolSet, { onError: () => {} });
for (const pin of [false, true]) {
  const client = await connectMcp(new StreamableHTTPClientTransport(http.url), pin);
  cases.push({
    name: `MCP loopback HTTP callTool (${client.getNegotiatedProtocolVersion()})`,
    body: () => client.callTool({ name: "math.add", arguments: input }),
  });
  cleanups.push(() => client.close());
}
cleanups.push(() => http.close());

// Every case warms up first; then rounds interleave the cases and each keeps its best round, so JIT
// order and a noisy neighbour on this shared machine skew the ratios less.
const rounds = 3;
const best = new Map<string, number>();
for (const { body } of cases) await meanMicroseconds(body, 200);
for (let round = 0; round < rounds; round += 1) {
  for (const { name, body } of cases) {
    const mean = await meanMicroseconds(body, (seconds * 1000) / rounds);
    best.set(name, Math.min(best.get(name) ?? Number.POSITIVE_INFINITY, mean));
  }
}
for (const cleanup of cleanups) await cleanup();
const rows: Row[] = cases.map(({ name }) => ({ name, meanMicroseconds: best.get(name) ?? Number.NaN }));

const direct = rows[0]?.meanMicroseconds ?? 1;
const toolsetCall = rows[2]?.meanMicroseconds ?? 1;
const format = (value: number) =>
  value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2);
console.log(
  `Node ${process.version}, best of ${rounds} rounds, ${seconds} s per row in all, sequential awaited calls of math.add({ a: 2, b: 3 })\n`,
);
console.log("| path | mean µs/call | calls/s | × direct | × toolset.call |");
console.log("| --- | ---: | ---: | ---: | ---: |");
for (const row of rows) {
  console.log(
    `| ${row.name} | ${format(row.meanMicroseconds)} | ${Math.round(1e6 / row.meanMicroseconds).toLocaleString("en-US")} | ${format(row.meanMicroseconds / direct)} | ${format(row.meanMicroseconds / toolsetCall)} |`,
  );
}
