/** The console over real HTTP: SDK v2 clients of both protocol revisions, a raw 2025 client, and the guards. */
import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, test } from "node:test";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createToolSet, silentLogger } from "@tackle/core";
import { type RunningConsole, startConsole } from "../src/console/start-console.ts";
import demoTools from "../src/modules/demo.ts";
import { createEmbeddedToolSource } from "../src/tool-source/create-embedded-tool-source.ts";
import { readJsonRpc } from "./json-rpc-response.ts";

const token = "test-token-0123456789";
/** Named in the 401 (no file is read: the console is handed its token). */
const tokenFile = "/home/someone/.tackle/console-token";
let consoleServer: RunningConsole;

before(async () => {
  const source = createEmbeddedToolSource([
    { module: "demo", toolset: createToolSet(demoTools), errors: [], close: () => {} },
    {
      module: "broken",
      toolset: createToolSet([]),
      errors: [{ source: "/nowhere/broken.js", message: "Cannot find module '/nowhere/broken.js'" }],
      close: () => {},
    },
  ]);
  consoleServer = await startConsole({
    source,
    listen: { host: "127.0.0.1", port: 0 },
    token,
    tokenFile,
    logger: silentLogger,
  });
});
after(() => consoleServer.close());

async function connect(
  mode: "legacy" | { pin: string },
  headers: Record<string, string> = { authorization: `Bearer ${token}` },
) {
  const client = new Client({ name: "console-test", version: "1.0.0" }, { versionNegotiation: { mode } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(consoleServer.url), { requestInit: { headers } }),
  );
  return client;
}

for (const [label, mode] of [
  ["2026-07-28 (SDK v2, pinned)", { pin: "2026-07-28" }],
  ["2025 (SDK v2, legacy handshake)", "legacy"],
] as const) {
  test(`an MCP client on the ${label} revision lists module.tool names and calls one`, async () => {
    const client = await connect(mode);
    try {
      const { tools } = await client.listTools();
      const names = tools.map((tool) => tool.name).sort();
      assert.deepEqual(names, [
        "demo.add",
        "demo.echo",
        "demo.now",
        "demo.text_stats",
        "tackle.modules",
        "tackle.result_page",
      ]);
      const add = tools.find((tool) => tool.name === "demo.add");
      assert.equal(add?.inputSchema.type, "object");
      assert.ok(add?.inputSchema.properties && "numbers" in add.inputSchema.properties);

      const result = await client.callTool({ name: "demo.add", arguments: { numbers: [2, 3, 4.5] } });
      assert.notEqual(result.isError, true);
      assert.deepEqual(result.structuredContent, { sum: 9.5 });

      const invalid = await client.callTool({ name: "demo.add", arguments: { numbers: "nope" } });
      assert.equal(invalid.isError, true);
      const refused = (
        invalid.structuredContent as { error: { code: string; message: string; data: { tool: string } } }
      ).error;
      assert.equal(refused.code, "invalid_input");
      // Named as the client called it, which is the only name it knows.
      assert.match(refused.message, /^Invalid input for tool "demo\.add"/);
      assert.equal(refused.data.tool, "demo.add");
      assert.match(
        (invalid.content as { text: string }[])[0]?.text ?? "",
        /^invalid_input: Invalid input for tool "demo\.add"/,
      );

      const modules = await client.callTool({ name: "tackle.modules", arguments: {} });
      const listed = (
        modules.structuredContent as { modules: { module: string; status: string; errors: unknown[] }[] }
      ).modules;
      assert.deepEqual(
        listed.map((info) => [info.module, info.status]),
        [
          ["broken", "failed"],
          ["demo", "ok"],
        ],
      );
    } finally {
      await client.close();
    }
  });
}

/** A hand-written 2025-03-26/2025-06-18 client: plain JSON-RPC POSTs, the way older MCP clients speak. */
async function post(body: unknown, headers: Record<string, string> = {}) {
  return fetch(consoleServer.url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      authorization: `Bearer ${token}`,
      ...headers,
    },
    body: JSON.stringify(body),
  });
}

test("a raw 2025-06-18 JSON-RPC client that does not keep its session initializes, lists and calls (stateless)", async () => {
  const initialize = await post({
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
  });
  assert.equal(initialize.status, 200);
  // The console offers a session; a client that does not send it back is served without one.
  assert.match(initialize.headers.get("mcp-session-id") ?? "", /^[0-9a-f-]{36}$/);
  const initialized = await readJsonRpc(initialize);
  assert.equal(initialized.result?.protocolVersion, "2025-06-18");

  const headers = { "mcp-protocol-version": "2025-06-18" };
  const listResponse = await post({ jsonrpc: "2.0", id: 2, method: "tools/list", params: {} }, headers);
  assert.equal(listResponse.headers.get("mcp-session-id"), null, "tools/list carries no mcp-session-id");
  const list = await readJsonRpc(listResponse);
  const names = ((list.result?.tools ?? []) as { name: string }[]).map((tool) => tool.name);
  assert.ok(names.includes("demo.echo"));

  const call = await readJsonRpc(
    await post(
      {
        jsonrpc: "2.0",
        id: 3,
        method: "tools/call",
        params: { name: "demo.echo", arguments: { text: "héllo" } },
      },
      headers,
    ),
  );
  assert.deepEqual(call.result?.structuredContent, { text: "héllo" });
});

/** fetch() will not send a forged Host header; node:http will, as a rebinding browser effectively does. */
function postWithHost(host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const outgoing = request(
      consoleServer.url,
      {
        method: "POST",
        headers: {
          host,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          authorization: `Bearer ${token}`,
        },
      },
      (response) => {
        let body = "";
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => {
          body += chunk;
        });
        response.on("end", () => resolve({ status: response.statusCode ?? 0, body }));
      },
    );
    outgoing.on("error", reject);
    outgoing.end(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }));
  });
}

test("Host and Origin that are not loopback get 403, even with the token", async () => {
  const hostile = await postWithHost("evil.example");
  assert.equal(hostile.status, 403);
  assert.match(hostile.body, /evil\.example/);

  const origin = await post(
    { jsonrpc: "2.0", id: 1, method: "tools/list" },
    { origin: "http://evil.example" },
  );
  assert.equal(origin.status, 403);
  await origin.body?.cancel();

  assert.equal((await postWithHost(`localhost.evil.example:${consoleServer.port}`)).status, 403);
  assert.equal((await postWithHost(`127.0.0.1.evil.example:${consoleServer.port}`)).status, 403);

  const loopbackOrigin = await post(
    {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
    },
    { origin: `http://localhost:${consoleServer.port}` },
  );
  assert.equal(loopbackOrigin.status, 200);
  await loopbackOrigin.body?.cancel();
});

test("no token, or a wrong one, gets 401 and the SDK client cannot connect", async () => {
  const none = await post({ jsonrpc: "2.0", id: 1, method: "tools/list" }, { authorization: "" });
  assert.equal(none.status, 401);
  assert.match(none.headers.get("www-authenticate") ?? "", /^Bearer/);
  const noneBody = (await none.json()) as { error: { code: string; message: string } };
  assert.equal(noneBody.error.code, "unauthorized");
  assert.match(noneBody.error.message, /A bearer token is required/);
  // Where the token is, and the way in without one, in the body and in the header a client shows.
  for (const text of [noneBody.error.message, none.headers.get("www-authenticate") ?? ""]) {
    assert.ok(text.includes(tokenFile), text);
    assert.match(text, /run tackle mcp instead \(MCP over stdio, no token\)/);
    assert.match(text, /tackle mcp --print-config/);
  }

  // A wrong token is told so, distinct from a missing one (they got the same message).
  const wrong = await post(
    { jsonrpc: "2.0", id: 1, method: "tools/list" },
    { authorization: "Bearer not-the-token" },
  );
  assert.equal(wrong.status, 401);
  assert.match(wrong.headers.get("www-authenticate") ?? "", /error="invalid_token"/);
  const wrongBody = (await wrong.json()) as { error: { code: string; message: string } };
  assert.equal(wrongBody.error.code, "invalid_token");
  assert.match(
    wrongBody.error.message,
    /The bearer token is wrong: it does not match this console's token file/,
  );
  assert.ok(wrongBody.error.message.includes(tokenFile));

  await assert.rejects(connect("legacy", {}));
});

test("OAuth discovery gets 404 saying the console takes its token file's bearer token or tackle mcp, behind the loopback guard", async () => {
  const base = new URL(consoleServer.url);
  for (const path of [
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-authorization-server",
  ]) {
    const answer = await fetch(new URL(path, base));
    assert.equal(answer.status, 404, path);
    const body = (await answer.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, "no_oauth");
    assert.ok(body.error.message.includes(tokenFile), body.error.message);
    assert.match(body.error.message, /does not use OAuth.*run tackle mcp/);
  }
  const foreign = await new Promise<number>((resolve, reject) => {
    request(
      new URL("/.well-known/oauth-protected-resource", base),
      { headers: { host: "evil.example" } },
      (reply) => {
        reply.resume();
        resolve(reply.statusCode ?? 0);
      },
    )
      .on("error", reject)
      .end();
  });
  assert.equal(foreign, 403);
});

test("a kept-alive connection outlives a hold of the console's event loop past Node's 5 s keep-alive", async () => {
  // The client and the console share this process, as the result-budget tests' do: a hold of the
  // loop (there, the tokenizer counting a 2 MB answer at load 25) holds both. The client then writes
  // its next request on the pooled connection, and Node ran the server's overdue keep-alive timer
  // before reading it: the socket was destroyed with the request unread, ECONNRESET.
  const echo = async (text: string) =>
    readJsonRpc(
      await post(
        { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "demo.echo", arguments: { text } } },
        { "mcp-protocol-version": "2025-06-18" },
      ),
    );
  assert.deepEqual((await echo("before")).result?.structuredContent, { text: "before" });
  // 7 s asleep (no CPU burnt): past the 5 s keep-alive and the 1 s Node adds to its timer.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 7000);
  assert.deepEqual((await echo("after")).result?.structuredContent, { text: "after" });
});
