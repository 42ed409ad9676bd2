/**
 * Progress and log messages of a tool served by another node reach MCP clients of the console (both
 * protocol revisions) and of `tackle mcp`, across a real nats-server; a plain call names no inbox.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Client, LOG_LEVEL_META_KEY, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { connect, type Msg, type NatsConnection } from "@nats-io/transport-node";
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

const reporting = fileURLToPath(new URL("./fixtures/reporting-bundle.ts", import.meta.url));
const home = tempHome();
let nats: NatsServerHandle;
let node: ServeProcess;
let consoleNode: ServeProcess;
let spy: NatsConnection;
/** Every request for the reporting module, as a bystander on its subjects sees it. */
const requests: Msg[] = [];

const steps = [
  { progress: 1, total: 3, message: "step 1" },
  { progress: 2, total: 3, message: "step 2" },
  { progress: 3, total: 3, message: "step 3" },
];

before(async () => {
  nats = await startNatsServer();
  const mesh = { MESH_BROKER_URL: nats.url, TACKLE_HOME: home.path };
  node = await startServe(
    ["--no-console"],
    cleanEnv({ ...mesh, MESH_NODE: "reporter", MESH_TOOL_MODULES: `report=${reporting}` }),
    /module report: ok/,
  );
  consoleNode = await startFrontConsole(mesh);
  spy = await connect({ servers: nats.url });
  spy.subscribe("tackle.tools.report.steps", {
    callback: (_error, message) => {
      requests.push(message);
    },
  });
  await spy.flush();
});

after(async () => {
  await spy?.close();
  await consoleNode?.stop();
  await node?.stop();
  await nats?.close();
  home.remove();
});

async function consoleClient(mode: "legacy" | { pin: "2026-07-28" }): Promise<Client> {
  const client = new Client({ name: "progress-test", version: "1" }, { versionNegotiation: { mode } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(consoleNode.url), {
      requestInit: { headers: { authorization: `Bearer ${readConsoleToken(consoleNode.tokenFile ?? "")}` } },
    }),
  );
  return client;
}

function collectLogs(client: Client): unknown[] {
  const logs: unknown[] = [];
  client.setNotificationHandler("notifications/message", (notification) => {
    logs.push(notification.params);
  });
  return logs;
}

/** The request the node received last, as the bystander saw it. */
function lastRequest(): Msg {
  const message = requests.at(-1);
  assert.ok(message, "the bystander saw the request");
  return message;
}

describe("through the console", () => {
  test("a 2026-07-28 client gets the mesh tool's progress in order and its log lines at its level", async () => {
    const client = await consoleClient({ pin: "2026-07-28" });
    try {
      const logs = collectLogs(client);
      const progress: unknown[] = [];
      const result = await client.callTool(
        { name: "report.steps", arguments: {}, _meta: { [LOG_LEVEL_META_KEY]: "info" } },
        { onprogress: (update) => progress.push(update) },
      );
      assert.deepEqual(result.structuredContent, { done: true });
      assert.deepEqual(progress, steps);
      assert.deepEqual(logs, [
        { level: "info", logger: "report.steps", data: { message: "halfway", step: 2 } },
        { level: "warning", logger: "report.steps", data: "almost done" },
        { level: "error", logger: "report.steps", data: "not really an error" },
      ]);
      assert.match(lastRequest().headers?.get("Tackle-Events") ?? "", /^_INBOX\./);
      assert.equal(lastRequest().headers?.get("Tackle-Log-Level"), "info");

      // Without a token and without a level: nothing more crosses, and nothing comes back.
      requests.length = 0;
      logs.length = 0;
      const plain = await client.callTool({ name: "report.steps", arguments: {} });
      assert.deepEqual(plain.structuredContent, { done: true });
      assert.equal(requests.length, 1);
      assert.equal(lastRequest().headers?.get("Tackle-Events"), "");
      assert.equal(lastRequest().headers?.get("Tackle-Progress"), "");
      assert.deepEqual(logs, []);
    } finally {
      await client.close();
    }
  });

  test("a 2025 client's logging/setLevel holds for its later calls on its session", async () => {
    const client = await consoleClient("legacy");
    try {
      const logs = collectLogs(client);
      const progress: unknown[] = [];
      await client.setLoggingLevel("warning");
      const result = await client.callTool(
        { name: "report.steps", arguments: {} },
        { onprogress: (update) => progress.push(update) },
      );
      assert.deepEqual(result.structuredContent, { done: true });
      assert.deepEqual(progress, steps);
      assert.deepEqual(
        logs.map((entry) => (entry as { level: string }).level),
        ["warning", "error"],
      );
      assert.equal(lastRequest().headers?.get("Tackle-Log-Level"), "warn");
    } finally {
      await client.close();
    }
  });
});

test("through tackle mcp (stdio, mesh source): progress with the client's token, log lines at its level; a plain call names no inbox", async () => {
  const client = new Client(
    { name: "progress-stdio", version: "1" },
    { versionNegotiation: { mode: "legacy" } },
  );
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: ["--conditions=@tackle/source", mainScript, "mcp"],
      env: cleanEnv({
        MESH_BROKER_URL: nats.url,
        MESH_NODE: "stdio",
        TACKLE_HOME: home.path,
        TACKLE_LOG_LEVEL: "silent",
      }) as Record<string, string>,
      stderr: "pipe",
    }),
  );
  try {
    requests.length = 0;
    const plain = await client.callTool({ name: "report.steps", arguments: {} });
    assert.deepEqual(plain.structuredContent, { done: true });
    assert.equal(lastRequest().headers?.get("Tackle-Events"), "");

    const logs = collectLogs(client);
    await client.setLoggingLevel("debug");
    const progress: unknown[] = [];
    const result = await client.callTool(
      { name: "report.steps", arguments: {} },
      { onprogress: (update) => progress.push(update) },
    );
    assert.deepEqual(result.structuredContent, { done: true });
    assert.deepEqual(progress, steps);
    assert.deepEqual(logs, [
      { level: "debug", logger: "report.steps", data: "starting" },
      { level: "info", logger: "report.steps", data: { message: "halfway", step: 2 } },
      { level: "warning", logger: "report.steps", data: "almost done" },
      { level: "error", logger: "report.steps", data: "not really an error" },
    ]);
    assert.equal(lastRequest().headers?.get("Tackle-Log-Level"), "debug");
  } finally {
    await client.close();
  }
});

/**
 * The SDK client hands notifications on a microtask later but settles a call at once when its result
 * is read; this test's own client holds each result back one microtask, so that what it checks is
 * whether the reports reached it, not how its reads were chunked.
 */
function holdingResults(transport: StdioClientTransport): StdioClientTransport {
  let handler: StdioClientTransport["onmessage"];
  const dispatch: NonNullable<StdioClientTransport["onmessage"]> = (message) => {
    if ("id" in message && !("method" in message)) queueMicrotask(() => handler?.(message));
    else handler?.(message);
  };
  Object.defineProperty(transport, "onmessage", {
    get: () => (handler === undefined ? undefined : dispatch),
    set: (value: StdioClientTransport["onmessage"]) => {
      handler = value;
    },
  });
  return transport;
}

test("through tackle mcp --console: the mesh tool's progress, and its log lines at the client's level, come back through the console", async () => {
  const client = new Client(
    { name: "progress-relay", version: "1" },
    { versionNegotiation: { mode: "legacy" } },
  );
  await client.connect(
    holdingResults(
      new StdioClientTransport({
        command: process.execPath,
        args: [
          "--conditions=@tackle/source",
          mainScript,
          "mcp",
          "--console",
          consoleNode.url,
          "--token-file",
          consoleNode.tokenFile ?? "",
        ],
        env: cleanEnv({ TACKLE_HOME: home.path, TACKLE_LOG_LEVEL: "silent" }) as Record<string, string>,
        stderr: "pipe",
      }),
    ),
  );
  try {
    const logs = collectLogs(client);
    const progress: unknown[] = [];
    const result = await client.callTool(
      { name: "report.steps", arguments: {} },
      { onprogress: (update) => progress.push(update) },
    );
    assert.deepEqual(result.structuredContent, { done: true });
    assert.deepEqual(progress, steps);
    // No level set: the console asks the node for no log lines.
    assert.equal(lastRequest().headers?.get("Tackle-Log-Level"), "");
    assert.deepEqual(logs, []);

    await client.setLoggingLevel("info");
    const logged = await client.callTool({ name: "report.steps", arguments: {} });
    assert.deepEqual(logged.structuredContent, { done: true });
    assert.deepEqual(logs, [
      { level: "info", logger: "report.steps", data: { message: "halfway", step: 2 } },
      { level: "warning", logger: "report.steps", data: "almost done" },
      { level: "error", logger: "report.steps", data: "not really an error" },
    ]);
    assert.equal(lastRequest().headers?.get("Tackle-Log-Level"), "info");
    // Reports made just before the result come before it at every hop, none lost on the way.
    for (let round = 0; round < 5; round++) {
      const burst: unknown[] = [];
      await client.callTool(
        { name: "report.burst", arguments: {} },
        { onprogress: (update) => burst.push(update) },
      );
      assert.deepEqual(burst, [
        { progress: 1, total: 3 },
        { progress: 2, total: 3 },
        { progress: 3, total: 3 },
      ]);
    }
  } finally {
    await client.close();
  }
});
