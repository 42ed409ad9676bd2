/**
 * `tackle mcp` (stdio) with its broker cut off (a relay in front of the broker, taken down): the
 * listing says so as the console's does, within 2 s: `tackle.modules` names the broker once in
 * `errors` and lists every module it knew `unreachable`, and `tools/list` carries the error in
 * `_meta["tackle/errors"]`. Once the relay is up again the module is `ok` and nothing is named.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import {
  type NatsServerHandle,
  startNatsServer,
  startTcpRelay,
  type TcpRelay,
  underLoadMs,
} from "@tackle/test-support";
import { cleanEnv, mainScript, type ServeProcess, startServe, tempHome } from "./tackle-process.ts";

const whoami = fileURLToPath(new URL("./fixtures/whoami-bundle.ts", import.meta.url));
const home = tempHome();
let nats: NatsServerHandle;
let relay: TcpRelay;
let node: ServeProcess;
let client: Client;

interface Listing {
  modules: { module: string; status: string; errors: { source: string; message: string }[] }[];
  errors: { source: string; message: string }[];
}

before(async () => {
  nats = await startNatsServer();
  relay = await startTcpRelay(nats.url);
  const mesh = { MESH_BROKER_URL: nats.url, TACKLE_HOME: home.path };
  client = new Client({ name: "mcp-broker-down", version: "1" });
  [node] = await Promise.all([
    startServe(
      ["--no-console"],
      cleanEnv({ ...mesh, MESH_NODE: "a", MESH_TOOL_MODULES: `alpha=${whoami}` }),
      /module alpha: ok/,
    ),
    client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: ["--conditions=@tackle/source", mainScript, "mcp"],
        env: cleanEnv({ ...mesh, MESH_BROKER_URL: relay.url }) as Record<string, string>,
        stderr: "pipe",
      }),
      { timeout: underLoadMs(60_000) },
    ),
  ]);
});

after(async () => {
  await client?.close();
  await node?.stop();
  await relay?.close();
  await nats?.close();
  home.remove();
});

async function listing(): Promise<Listing> {
  const result = await client.callTool({ name: "tackle.modules", arguments: {} });
  return result.structuredContent as unknown as Listing;
}

test("tackle mcp's listing names the unreachable broker once, within 2 s, and forgets it once the broker is back", async () => {
  const up = await listing();
  assert.deepEqual(
    up.modules.map((info) => [info.module, info.status]),
    [["alpha", "ok"]],
  );
  assert.deepEqual(up.errors, []);

  relay.down();
  // The client hears its connection reset at once; give its status a moment to turn.
  await sleep(250);
  const started = performance.now();
  const down = await listing();
  const elapsed = performance.now() - started;
  assert.ok(elapsed < underLoadMs(2000), `the listing took ${Math.round(elapsed)} ms`);
  assert.equal(down.errors.length, 1, JSON.stringify(down));
  assert.equal(down.errors[0]?.source, `broker ${relay.url}`);
  assert.match(down.errors[0]?.message ?? "", new RegExp(`The broker ${relay.url} is unreachable`));
  assert.deepEqual(
    down.modules.map((info) => [info.module, info.status, info.errors]),
    [["alpha", "unreachable", []]],
  );
  const tools = await client.listTools();
  assert.deepEqual(tools._meta?.["tackle/errors"], down.errors);

  relay.up();
  const deadline = performance.now() + underLoadMs(10_000);
  let again = await listing();
  while (again.errors.length > 0 || again.modules[0]?.status !== "ok") {
    assert.ok(performance.now() < deadline, `still ${JSON.stringify(again)} after the broker came back`);
    await sleep(250);
    again = await listing();
  }
});
