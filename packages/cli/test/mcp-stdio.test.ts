/** `tackle mcp` as a child process speaking MCP over stdio to SDK v2 clients of both protocol revisions. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { startNatsServer } from "@tackle/test-support";
import { cleanEnv, mainScript, startServe } from "./tackle-process.ts";

const brokenBundle = fileURLToPath(new URL("./fixtures/broken-bundle.js", import.meta.url));
const whoami = fileURLToPath(new URL("./fixtures/whoami-bundle.ts", import.meta.url));

function transport() {
  const env = cleanEnv({ MESH_TOOL_MODULES: `broken=${brokenBundle}`, TACKLE_LOG_LEVEL: "silent" });
  return new StdioClientTransport({
    command: process.execPath,
    args: ["--conditions=@tackle/source", mainScript, "mcp", "--builtin"],
    env: env as Record<string, string>,
    stderr: "pipe",
  });
}

for (const [label, mode] of [
  ["2025 (initialize handshake)", "legacy"],
  ["2026-07-28 (pinned)", { pin: "2026-07-28" }],
] as const) {
  test(`tackle mcp serves module.tool names to a ${label} client, and names the broken module`, async () => {
    const client = new Client({ name: "stdio-test", version: "1.0.0" }, { versionNegotiation: { mode } });
    await client.connect(transport());
    try {
      const { tools } = await client.listTools();
      const names = tools.map((tool) => tool.name);
      for (const name of ["demo.add", "demo.echo", "demo.now", "demo.text_stats", "tackle.modules"]) {
        assert.ok(names.includes(name), `${name} in ${names.join(", ")}`);
      }
      assert.ok(!names.some((name) => name.startsWith("broken.")));
      const echoed = await client.callTool({ name: "demo.echo", arguments: { text: "over stdio" } });
      assert.deepEqual(echoed.structuredContent, { text: "over stdio" });
      const modules = await client.callTool({ name: "tackle.modules", arguments: {} });
      const broken = (
        modules.structuredContent as {
          modules: { module: string; status: string; errors: { message: string }[] }[];
        }
      ).modules.find((info) => info.module === "broken");
      assert.equal(broken?.status, "failed");
      assert.match(broken?.errors[0]?.message ?? "", /broken on purpose/);
    } finally {
      await client.close();
    }
  });
}

test("a broker password in MESH_BROKER_URL reaches neither the MCP client's instructions nor the log", async () => {
  const nats = await startNatsServer();
  const password = "s3cret-broker-pass";
  const brokerUrl = nats.url.replace("nats://", `nats://alice:${password}@`);
  const child = new StdioClientTransport({
    command: process.execPath,
    args: ["--conditions=@tackle/source", mainScript, "mcp"],
    env: cleanEnv({ MESH_BROKER_URL: brokerUrl, MESH_NODE: "audit", TACKLE_LOG_LEVEL: "info" }) as Record<
      string,
      string
    >,
    stderr: "pipe",
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const client = new Client(
    { name: "stdio-test", version: "1.0.0" },
    { versionNegotiation: { mode: "legacy" } },
  );
  try {
    await client.connect(child);
    const instructions = client.getInstructions() ?? "";
    assert.match(instructions, /nats:\/\/\*\*\*@127\.0\.0\.1:\d+/, "the broker is still named");
    assert.ok(!instructions.includes(password), `instructions: ${instructions}`);
    await client.listTools();
    assert.match(stderr, /tackle mcp ready/);
    assert.ok(!stderr.includes(password), `stderr: ${stderr}`);
  } finally {
    await client.close();
    await nats.close();
  }
});

test("tackle mcp on a mesh lists and calls module.tool served by a node runtime on the broker", async () => {
  const nats = await startNatsServer();
  // Another process, node "far", serves the beta module on the private broker; tackle mcp only joins it.
  const runtime = await startServe(
    ["--no-console"],
    cleanEnv({ MESH_BROKER_URL: nats.url, MESH_NODE: "far", MESH_TOOL_MODULES: `beta=${whoami}` }),
    /module beta: ok/,
  );
  const client = new Client(
    { name: "stdio-test", version: "1.0.0" },
    { versionNegotiation: { mode: "legacy" } },
  );
  try {
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: ["--conditions=@tackle/source", mainScript, "mcp"],
        env: cleanEnv({ MESH_BROKER_URL: nats.url, MESH_NODE: "near", TACKLE_LOG_LEVEL: "silent" }) as Record<
          string,
          string
        >,
        stderr: "pipe",
      }),
    );
    const names = (await client.listTools()).tools.map((tool) => tool.name);
    assert.ok(names.includes("beta.whoami"), `beta.whoami in ${names.join(", ")}`);
    const result = await client.callTool({ name: "beta.whoami", arguments: {} });
    assert.equal(result.isError, undefined, JSON.stringify(result));
    const answered = result.structuredContent as { node: string; module: string; pid: number };
    assert.deepEqual([answered.node, answered.module], ["far", "beta"]);
    assert.equal(answered.pid, runtime.child.pid, "the runtime process answered, over the broker");
  } finally {
    await client.close();
    await runtime.stop();
    await nats.close();
  }
});
