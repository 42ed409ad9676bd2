/**
 * Across processes, a call's arguments are judged by the tool's own schema as the client sent them,
 * `__proto__` and `constructor` keys included:
 *
 * - through the console to a module on another node, across a real nats-server: the console does not
 *   judge them itself, the mesh carries them as JSON text (own keys, `__proto__` included) and the
 *   node's tool set validates. A 2025 session reaches the console's MCP server (whose SDK parse dropped
 *   a top-level `__proto__`); a client pinned to 2026-07-28 is answered on the console's direct path;
 * - `tackle mcp` over stdio, whose connection is served by the same MCP server.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import { readConsoleToken } from "../src/console/console-token.ts";
import {
  cleanEnv,
  mainScript,
  type ServeProcess,
  startFrontConsole,
  startServe,
  tempHome,
} from "./tackle-process.ts";

const bundle = fileURLToPath(new URL("./fixtures/sent-arguments-bundle.ts", import.meta.url));
const home = tempHome();
let nats: NatsServerHandle;
let node: ServeProcess;
let consoleNode: ServeProcess;

before(async () => {
  nats = await startNatsServer();
  const mesh = { MESH_BROKER_URL: nats.url, TACKLE_HOME: home.path };
  node = await startServe(
    ["--no-console"],
    cleanEnv({ ...mesh, MESH_NODE: "keeper", MESH_TOOL_MODULES: `keys=${bundle}` }),
    /module keys: ok/,
  );
  consoleNode = await startFrontConsole(mesh);
});

after(async () => {
  await consoleNode?.stop();
  await node?.stop();
  await nats?.close();
  home.remove();
});

interface Answer {
  readonly isError?: boolean;
  readonly structuredContent?: { sent?: string; plainPrototype?: boolean; error?: { code?: string } };
}

/** The strict tool refuses hostile keys as `invalid_input`; the pass-through one is handed them as sent. */
async function checkSentArguments(client: Client): Promise<void> {
  const call = async (name: string, text: string) =>
    (await client.callTool({ name, arguments: JSON.parse(text) })) as Answer;
  for (const text of ['{"__proto__":{"n":1},"title":"t","n":2}', '{"title":"t","n":2,"constructor":{}}']) {
    const refused = await call("keys.strict", text);
    assert.equal(refused.isError, true, `keys.strict ${text}: refused`);
    assert.equal(refused.structuredContent?.error?.code, "invalid_input", text);
  }
  assert.notEqual((await call("keys.strict", '{"title":"t","n":2}')).isError, true);
  for (const text of [
    '{"id":"a","__proto__":{"x":1}}',
    '{"__proto__":5,"constructor":{"prototype":{"polluted":true}}}',
    '{"nested":{"__proto__":{"y":1},"constructor":{"prototype":{}}},"list":[{"__proto__":[]}]}',
  ]) {
    const answer = await call("keys.passthrough", text);
    assert.notEqual(answer.isError, true, text);
    assert.equal(answer.structuredContent?.sent, JSON.stringify(JSON.parse(text)), "handed as sent");
    assert.equal(answer.structuredContent?.plainPrototype, true, `${text}: no prototype set instead`);
  }
}

for (const mode of ["legacy", { pin: "2026-07-28" }] as const) {
  const label = mode === "legacy" ? "a 2025 client (initialize)" : "a client pinned to 2026-07-28";
  test(`the console, ${label}: a module on another node judges __proto__ and constructor keys as sent`, async () => {
    const client = new Client({ name: "sent-arguments", version: "1" }, { versionNegotiation: { mode } });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(consoleNode.url), {
        requestInit: {
          headers: { authorization: `Bearer ${readConsoleToken(consoleNode.tokenFile ?? "")}` },
        },
      }),
    );
    try {
      await checkSentArguments(client);
    } finally {
      await client.close();
    }
  });

  test(`tackle mcp over stdio, ${label}: a module judges __proto__ and constructor keys as sent`, async () => {
    const client = new Client({ name: "sent-arguments", version: "1" }, { versionNegotiation: { mode } });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: ["--conditions=@tackle/source", mainScript, "mcp"],
        env: cleanEnv({ MESH_TOOL_MODULES: `keys=${bundle}`, TACKLE_LOG_LEVEL: "silent" }) as Record<
          string,
          string
        >,
        stderr: "pipe",
      }),
    );
    try {
      await checkSentArguments(client);
    } finally {
      await client.close();
    }
  });
}
