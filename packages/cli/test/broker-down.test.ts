/** The console with its broker gone: the listing says so, quickly, and keeps every module it knew. */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { freePort, type NatsServerHandle, startNatsServer, underLoadMs } from "@tackle/test-support";
import { readConsoleToken } from "../src/console/console-token.ts";
import { cleanEnv, runTackle, type ServeProcess, startServe, tempHome } from "./tackle-process.ts";

const whoami = fileURLToPath(new URL("./fixtures/whoami-bundle.ts", import.meta.url));
const home = tempHome();
let nats: NatsServerHandle;
let node: ServeProcess;
let client: Client;

interface Listing {
  modules: {
    module: string;
    status: string;
    tools: unknown[];
    errors: { source: string; message: string }[];
  }[];
  errors: { source: string; message: string }[];
}

before(async () => {
  nats = await startNatsServer();
  const mesh = { MESH_BROKER_URL: nats.url, TACKLE_HOME: home.path };
  const issued = await runTackle(["mesh", "issue", "b", "beta"], { env: cleanEnv(mesh) });
  assert.equal(issued.code, 0, issued.stderr);
  node = await startServe(
    [],
    cleanEnv({
      ...mesh,
      MESH_NODE: "a",
      MESH_TOOL_MODULES: `alpha=${whoami}`,
      MESH_CONSOLE_LISTEN: `127.0.0.1:${await freePort()}`,
    }),
  );
  client = new Client({ name: "broker-down", version: "1" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(node.url), {
      requestInit: { headers: { authorization: `Bearer ${readConsoleToken(node.tokenFile ?? "")}` } },
    }),
  );
});

after(async () => {
  await client?.close();
  await node?.stop();
  await nats?.close();
  home.remove();
});

async function listing(): Promise<Listing> {
  const result = await client.callTool({ name: "tackle.modules", arguments: {} });
  return result.structuredContent as unknown as Listing;
}

test("with the broker down the listing names it within 2 s, once, and every known module unreachable, the node's own included (it listed that one ok while its calls failed)", async () => {
  const up = await listing();
  assert.deepEqual(
    up.modules.map((info) => [info.module, info.status]),
    [
      ["alpha", "ok"],
      ["beta", "unreachable"],
    ],
  );
  assert.deepEqual(up.errors, []);

  await nats.stop();
  const started = performance.now();
  const down = await listing();
  const elapsed = performance.now() - started;
  // 2 s on a quiet machine, scaled by the load (a broker wait it must not fall into is 30 s and more).
  assert.ok(elapsed < underLoadMs(2000), `the listing took ${Math.round(elapsed)} ms`);
  assert.equal(down.errors.length, 1);
  assert.match(
    down.errors[0]?.message ?? "",
    new RegExp(`The broker nats://127\\.0\\.0\\.1:${nats.port} is unreachable`),
  );
  // Every call goes through the broker, this node's own included: no module is ok, and the reason is
  // said once (in `errors`), not again on every row. This node's own module keeps its tools.
  assert.deepEqual(
    down.modules.map((info) => [info.module, info.status, info.errors]),
    [
      ["alpha", "unreachable", []],
      ["beta", "unreachable", []],
    ],
  );
  assert.equal(down.modules.find((info) => info.module === "alpha")?.tools.length, 1);
  const call = await client.callTool({ name: "alpha.whoami", arguments: {} });
  assert.equal(call.isError, true, "a call while the broker is down fails, as its listing said");

  // The web page's listing says the same, the reason once beside the modules.
  const page = (await (
    await fetch(new URL("/api/modules", node.url), {
      headers: { authorization: `Bearer ${readConsoleToken(node.tokenFile ?? "")}` },
    })
  ).json()) as Listing;
  assert.deepEqual(
    page.modules.map((info) => [info.module, info.status, info.errors.length]),
    [
      ["alpha", "unreachable", 0],
      ["beta", "unreachable", 0],
    ],
  );
  assert.equal(page.errors.length, 1);
  assert.match(page.errors[0]?.message ?? "", /is unreachable/);

  const tools = await runTackle(["tools", "--console", node.url], {
    env: cleanEnv({ TACKLE_HOME: home.path }),
  });
  assert.equal(tools.code, 1);
  assert.match(tools.stderr, /tackle: broker nats:\/\/127\.0\.0\.1:\d+: The broker .* is unreachable/);
  assert.match(tools.stdout, /^alpha\s+unreachable/m);
  assert.match(tools.stdout, /^beta\s+unreachable/m);
  assert.doesNotMatch(tools.stdout, /unreachable\n\s+broker/, "no row repeats the broker's error");
  assert.equal(tools.stderr.match(/is unreachable/g)?.length, 1, tools.stderr);
  const relaxed = await runTackle(["tools", "--console", node.url, "--allow-unhealthy"], {
    env: cleanEnv({ TACKLE_HOME: home.path }),
  });
  assert.equal(relaxed.code, 0, relaxed.stderr);

  await nats.restart();
  await eventuallyOk();
});

async function eventuallyOk(): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const again = await listing();
    if (
      again.errors.length === 0 &&
      again.modules.every((info) => info.status === "ok" || info.module === "beta") &&
      again.modules.find((info) => info.module === "alpha")?.errors.length === 0
    )
      return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.fail("the listing did not recover after the broker came back");
}
