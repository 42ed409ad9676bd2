/**
 * Result cursors belong to the credential that got them: the console's MCP endpoint served over real
 * HTTP with no guard in front, so two bearer tokens can reach it. A cursor one credential got is
 * refused, as unknown, to the other (in a session and session-less), and still reads for its own.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { type ServerType, serve } from "@hono/node-server";
import { type CallToolResult, Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createToolSet, silentLogger } from "@tackle/core";
import { createMcpEndpoint, type McpEndpoint } from "../src/console/mcp-endpoint.ts";
import { createEmbeddedToolSource } from "../src/tool-source/create-embedded-tool-source.ts";
import { largeResultTools } from "./fixtures/large-results-bundle.ts";

let endpoint: McpEndpoint;
let server: ServerType;
let url: URL;
const clients: Client[] = [];

before(async () => {
  const source = createEmbeddedToolSource([
    { module: "large", toolset: createToolSet(largeResultTools()), errors: [], close: () => {} },
  ]);
  endpoint = createMcpEndpoint(source, silentLogger, { resultBudget: 2_000 });
  server = serve({ fetch: (request) => endpoint.fetch(request), hostname: "127.0.0.1", port: 0 });
  await once(server, "listening");
  url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`);
});

after(async () => {
  for (const client of clients) await client.close();
  await endpoint.close();
  server.close();
});

async function connect(token: string, mode: "legacy" | { pin: "2026-07-28" }): Promise<Client> {
  const client = new Client(
    { name: "cursor-credential", version: "1.0.0" },
    { versionNegotiation: { mode } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(url, {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  clients.push(client);
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown>) {
  return (await client.callTool({ name, arguments: args }, { timeout: 60_000 })) as CallToolResult;
}

test("a cursor is refused to another credential, in a session and session-less, and reads for its own", async () => {
  const first = await call(await connect("alice-token", "legacy"), "large.text", { lines: 1_000 });
  const cursor = (first._meta?.["tackle/resultPage"] as { cursor?: string } | undefined)?.cursor;
  assert.ok(cursor, "the answer was cut");
  for (const other of [
    await connect("mallory-token", "legacy"),
    await connect("mallory-token", { pin: "2026-07-28" }),
  ]) {
    const refused = await call(other, "tackle.result_page", { cursor });
    assert.equal(refused.isError, true);
    assert.equal((refused.structuredContent as { error: { code: string } }).error.code, "not_found");
    assert.match(
      (refused.content[0] as { text: string }).text,
      /not_found: .*read only with the credential that received it/,
    );
    assert.ok(!JSON.stringify(refused).includes("line 0"), "nothing of the answer leaks");
  }
  const own = await call(await connect("alice-token", { pin: "2026-07-28" }), "tackle.result_page", {
    cursor,
  });
  assert.notEqual(own.isError, true);
  assert.match((own.content.at(-1) as { text: string }).text, /Part 2 of a cut answer/);
});
