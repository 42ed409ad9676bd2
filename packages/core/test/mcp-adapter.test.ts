/**
 * The `/mcp` adapter with the real MCP SDK v2: a child process over stdio and a loopback Streamable
 * HTTP server, each with both protocol revisions the SDK serves. The client chooses the revision:
 * `versionNegotiation` absent (or `legacy`) runs the 2025 `initialize` handshake (2025-11-25);
 * `{ pin: "2026-07-28" }` opens with `server/discover` and the per-request envelope.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport, type Transport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { type McpHttpServer, serveMcpHttp, serveMcpStdio, toolSetFromMcp } from "../src/mcp/index.ts";
import { sampleToolSet, waitAborts } from "./fixtures/sample-tools.ts";

const fixture = fileURLToPath(new URL("./fixtures/mcp-stdio-server.ts", import.meta.url));
const revisions = [
  { label: "2025-11-25", mode: "legacy" as const, era: "legacy" },
  { label: "2026-07-28", mode: { pin: "2026-07-28" }, era: "modern" },
];
const local = sampleToolSet();

async function connect(transport: Transport, mode: (typeof revisions)[number]["mode"]): Promise<Client> {
  const client = new Client({ name: "tackle-test", version: "0.1.0" }, { versionNegotiation: { mode } });
  await client.connect(transport);
  return client;
}

function firstText(result: Awaited<ReturnType<Client["callTool"]>>): string {
  const block = result.content?.[0];
  assert.ok(block?.type === "text");
  return block.text;
}

/** What every transport and revision must show. */
async function assertServesTheToolSet(client: Client): Promise<void> {
  const { tools } = await client.listTools();
  assert.deepEqual(
    tools.map((tool) => tool.name),
    ["math.add", "orders.lookup", "process.pid", "text.upper", "wait", "tackle.result_page"],
  );
  const add = tools[0];
  assert.deepEqual(add?.inputSchema, local.get("math.add")?.inputJsonSchema);
  assert.deepEqual(add?.outputSchema, local.get("math.add")?.outputJsonSchema);
  assert.equal(add?.description, "Adds two numbers.");
  assert.equal(add?.annotations?.readOnlyHint, true);
  assert.equal(add?.annotations?.idempotentHint, true);

  const sum = await client.callTool({ name: "math.add", arguments: { a: 2, b: 3 } });
  assert.equal(sum.isError ?? false, false);
  assert.deepEqual(sum.structuredContent, { sum: 5 });

  const invalid = await client.callTool({ name: "math.add", arguments: { a: "two" } });
  assert.equal(invalid.isError, true);
  const error = (
    invalid.structuredContent as { error: { code: string; data: { issues: { path: unknown[] }[] } } }
  ).error;
  assert.equal(error.code, "invalid_input");
  assert.deepEqual(
    error.data.issues.map((issue) => issue.path),
    [["a"], ["b"]],
  );

  // The same server, seen through an MCP client as a Tackle tool set: coded errors survive the wire,
  // and the paging tool comes along, so a model reading a cut answer can read on.
  const remote = await toolSetFromMcp(client, { prefix: "remote" });
  assert.deepEqual(remote.names, [
    "remote.math.add",
    "remote.orders.lookup",
    "remote.process.pid",
    "remote.text.upper",
    "remote.wait",
    "remote.tackle.result_page",
  ]);
  assert.deepEqual(remote.get("remote.math.add")?.inputJsonSchema, local.get("math.add")?.inputJsonSchema);
  assert.deepEqual(remote.get("remote.math.add")?.annotations, {
    title: "Add",
    readOnlyHint: true,
    idempotentHint: true,
  });
  assert.deepEqual(await remote.call("remote.math.add", { a: 1, b: 1 }), { ok: true, output: { sum: 2 } });
  // Outputs keep their JSON type across the wire: a string stays a string, a number a number.
  assert.deepEqual(await remote.call("remote.text.upper", { text: "42" }), { ok: true, output: "42" });
  const pid = await remote.invoke("remote.process.pid", {});
  assert.equal(typeof pid, "number");
  const missing = await remote.call("remote.orders.lookup", { id: 404 });
  assert.ok(!missing.ok);
  assert.equal(missing.error.code, "not_found");
  assert.deepEqual(missing.error.data, { id: 404 });
  const refused = await remote.call("remote.math.add", { a: "two" });
  assert.ok(!refused.ok);
  assert.equal(refused.error.code, "invalid_input");
}

describe("MCP over stdio with a real child process", () => {
  for (const revision of revisions) {
    it(`serves the tool set at protocol ${revision.label}`, async () => {
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: ["--conditions=@tackle/source", fixture],
        stderr: "pipe",
      });
      const client = await connect(transport, revision.mode);
      try {
        assert.equal(client.getNegotiatedProtocolVersion(), revision.label);
        assert.equal(client.getProtocolEra(), revision.era);
        assert.equal(client.getServerVersion()?.name, "sample-tools");
        await assertServesTheToolSet(client);
        const pid = await client.callTool({ name: "process.pid", arguments: {} });
        const childPid = Number(firstText(pid));
        assert.ok(Number.isInteger(childPid) && childPid !== process.pid, "the tool ran in the child");
      } finally {
        await client.close();
      }
    });
  }
});

describe("MCP over Streamable HTTP on loopback", () => {
  let server: McpHttpServer;
  before(async () => {
    server = await serveMcpHttp(sampleToolSet(), { name: "sample-tools" });
  });
  after(() => server.close());

  for (const revision of revisions) {
    it(`serves the tool set at protocol ${revision.label}, statelessly`, async () => {
      const client = await connect(new StreamableHTTPClientTransport(server.url), revision.mode);
      try {
        assert.equal(client.getNegotiatedProtocolVersion(), revision.label);
        assert.equal(client.getProtocolEra(), revision.era);
        await assertServesTheToolSet(client);
        const pid = await client.callTool({ name: "process.pid", arguments: {} });
        assert.equal(Number(firstText(pid)), process.pid);
      } finally {
        await client.close();
      }
    });
  }

  it("carries a client-side timeout to the tool as an abort", async () => {
    const client = await connect(new StreamableHTTPClientTransport(server.url), { pin: "2026-07-28" });
    try {
      const remote = await toolSetFromMcp(client);
      const result = await remote.call("wait", { label: "http-timeout" }, { timeoutMs: 100 });
      assert.ok(!result.ok);
      assert.equal(result.error.code, "timeout");
      const deadline = Date.now() + 2000;
      while (!waitAborts.includes("http-timeout") && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
      assert.ok(waitAborts.includes("http-timeout"), "the serving side saw the abort");
    } finally {
      await client.close();
    }
  });

  it("answers on a kept-alive connection after the event loop was held past Node's 5 s keep-alive", async () => {
    // Client and server share this process: a hold of the loop (a large answer, a busy machine)
    // holds both. The client's next request goes out on its pooled connection, and Node ran the
    // server's overdue idle timer before reading it: the socket was destroyed under it, ECONNRESET.
    const call = async (text: string) => {
      const response = await fetch(server.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-protocol-version": "2025-06-18",
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "tools/call",
          params: { name: "text.upper", arguments: { text } },
        }),
      });
      assert.equal(response.status, 200);
      return response.text();
    };
    assert.match(await call("before"), /BEFORE/);
    // 7 s asleep (no CPU burnt): past the 5 s keep-alive and the 1 s Node adds to its timer.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 7000);
    assert.match(await call("after"), /AFTER/);
  });

  it("refuses a foreign Host or Origin (DNS rebinding) and a non-loopback bind", async () => {
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} });
    const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    assert.equal(await postStatus(server.url, body, { ...headers, host: "evil.example" }), 403);
    assert.equal(await postStatus(server.url, body, { ...headers, origin: "http://evil.example" }), 403);
    await assert.rejects(serveMcpHttp(sampleToolSet(), { host: "0.0.0.0" }), { code: "not_loopback" });
  });
});

/** A raw POST: `fetch` will not send a forged Host header, node:http will. */
async function postStatus(url: URL, body: string, headers: Record<string, string>): Promise<number> {
  const request = httpRequest(url, { method: "POST", headers });
  request.end(body);
  const [response] = (await once(request, "response")) as [IncomingMessage];
  response.resume();
  return response.statusCode ?? 0;
}

describe("MCP over an in-memory transport pair", () => {
  for (const revision of revisions) {
    it(`serves the tool set at protocol ${revision.label}`, async () => {
      const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
      const served = serveMcpStdio(sampleToolSet(), { transport: serverSide });
      const client = await connect(clientSide, revision.mode);
      try {
        assert.equal(client.getNegotiatedProtocolVersion(), revision.label);
        await assertServesTheToolSet(client);
      } finally {
        await client.close();
        await served.close();
      }
    });
  }
});
