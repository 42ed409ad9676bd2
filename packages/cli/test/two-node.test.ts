/** Two runtime processes on one nats-server: node A's console calls a tool only node B serves; B stops, B's module is reported unreachable. */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { connectMesh, openMeshBuckets } from "@tackle/mesh";
import { freePort, type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import { readConsoleToken } from "../src/console/console-token.ts";
import { cleanEnv, runTackle, type ServeProcess, startServe, tempHome } from "./tackle-process.ts";

const whoami = fileURLToPath(new URL("./fixtures/whoami-bundle.ts", import.meta.url));
const home = tempHome();
let nats: NatsServerHandle;
let nodeA: ServeProcess;
let nodeB: ServeProcess;
let client: Client;

before(async () => {
  nats = await startNatsServer();
  const mesh = { MESH_BROKER_URL: nats.url, TACKLE_HOME: home.path };
  // The admin command puts beta in the catalogue, so the mesh knows of it even when nothing serves it.
  const issued = await runTackle(["mesh", "issue", "b", "beta", "--description", "served by node b only"], {
    env: cleanEnv(mesh),
  });
  assert.equal(issued.code, 0, issued.stderr);
  nodeB = await startServe(
    ["--no-console"],
    cleanEnv({ ...mesh, MESH_NODE: "b", MESH_TOOL_MODULES: `beta=${whoami}` }),
    /module beta: ok/,
  );
  nodeA = await startServe(
    [],
    cleanEnv({
      ...mesh,
      MESH_NODE: "a",
      MESH_TOOL_MODULES: `alpha=${whoami}`,
      MESH_CONSOLE_LISTEN: `127.0.0.1:${await freePort()}`,
    }),
  );
  client = new Client(
    { name: "two-node", version: "1" },
    { versionNegotiation: { mode: { pin: "2026-07-28" } } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(nodeA.url), {
      requestInit: { headers: { authorization: `Bearer ${readConsoleToken(nodeA.tokenFile ?? "")}` } },
    }),
  );
});

after(async () => {
  await client?.close();
  await nodeA?.stop();
  await nodeB?.stop();
  await nats?.close();
  home.remove();
});

test("node A's console lists both nodes' modules and calls the tool only node B serves", async () => {
  assert.match(nodeA.banner, /^tackle serve: mesh node a$/m);
  const { tools } = await client.listTools();
  const names = tools.map((tool) => tool.name);
  assert.ok(names.includes("alpha.whoami") && names.includes("beta.whoami"), names.join(", "));
  const result = await client.callTool({ name: "beta.whoami", arguments: {} });
  assert.equal(result.isError, undefined);
  assert.deepEqual((result.structuredContent as { node: string; module: string }).node, "b");
  assert.notEqual((result.structuredContent as { pid: number }).pid, nodeA.child.pid);
});

test("tackle mesh ls shows the membership and the catalogue", async () => {
  const listed = await runTackle(["mesh", "ls", "--json"], { env: cleanEnv({ MESH_BROKER_URL: nats.url }) });
  assert.equal(listed.code, 0, listed.stderr);
  const { memberships, catalogue } = JSON.parse(listed.stdout) as {
    memberships: { node: string; module: string; prefix: string }[];
    catalogue: { module: string; description?: string }[];
  };
  assert.deepEqual(
    memberships.map((record) => `${record.node}.${record.module}`),
    ["b.beta"],
  );
  assert.deepEqual(
    catalogue.map((record) => [record.module, record.description]),
    [["beta", "served by node b only"]],
  );
});

test("tackle mesh ls lists the good records and names a corrupt one (it died with a stack trace)", async () => {
  const connection = await connectMesh({ servers: nats.url });
  try {
    const { membership } = await openMeshBuckets(connection);
    await membership.put("zz.corrupt", "{ not json");
    const listed = await runTackle(["mesh", "ls"], { env: cleanEnv({ MESH_BROKER_URL: nats.url }) });
    assert.equal(listed.code, 1);
    assert.match(listed.stdout, /^b\tbeta\t/m);
    assert.match(listed.stderr, /^tackle: unreadable record tackle-mesh-membership\/zz\.corrupt: /m);
    assert.doesNotMatch(listed.stderr, /\n\s+at /);
    const json = await runTackle(["mesh", "ls", "--json"], { env: cleanEnv({ MESH_BROKER_URL: nats.url }) });
    const parsed = JSON.parse(json.stdout) as { memberships: unknown[]; invalid: { key: string }[] };
    assert.equal(parsed.memberships.length, 1);
    assert.deepEqual(
      parsed.invalid.map((record) => record.key),
      ["zz.corrupt"],
    );
  } finally {
    await openMeshBuckets(connection).then(({ membership }) => membership.purge("zz.corrupt"));
    await connection.drain();
  }
});

test("after node B stops, tackle tools reports beta as unreachable, with and without --console", async () => {
  assert.equal(await nodeB.stop(), 0);
  const viaConsole = await runTackle(["tools", "--json", "--console", nodeA.url], {
    env: cleanEnv({ TACKLE_HOME: home.path }),
  });
  // An unreachable module makes the listing exit 1 (it exited 0), naming it on stderr.
  assert.equal(viaConsole.code, 1, viaConsole.stderr);
  assert.match(viaConsole.stderr, /1 module not ok: beta \(unreachable\)/);
  const modules = JSON.parse(viaConsole.stdout) as {
    module: string;
    status: string;
    errors: { message: string }[];
  }[];
  assert.deepEqual(
    modules.map((info) => [info.module, info.status]),
    [
      ["alpha", "ok"],
      ["beta", "unreachable"],
    ],
  );
  assert.match(modules[1]?.errors[0]?.message ?? "", /beta/);

  const viaBroker = await runTackle(["tools", "--allow-unhealthy"], {
    env: cleanEnv({ MESH_BROKER_URL: nats.url }),
  });
  assert.equal(viaBroker.code, 0, viaBroker.stderr);
  assert.match(viaBroker.stdout, /^beta\s+unreachable\s/m);
  assert.match(viaBroker.stdout, /^alpha\s+ok\s+a\s+whoami$/m);

  const call = await runTackle(["call", "beta.whoami", "{}", "--console", nodeA.url], {
    env: cleanEnv({ TACKLE_HOME: home.path }),
  });
  assert.equal(call.code, 1);
  assert.match(call.stderr, /^error unreachable: /m);

  const { tools } = await client.listTools();
  const statuses = await client.callTool({ name: "tackle.modules", arguments: {} });
  const beta = (statuses.structuredContent as { modules: { module: string; status: string }[] }).modules.find(
    (info) => info.module === "beta",
  );
  assert.equal(beta?.status, "unreachable");
  assert.ok(!tools.some((tool) => tool.name === "beta.whoami"));
});

test("tackle mesh revoke takes beta off node b and out of the catalogue; revoking it again is refused", async () => {
  const env = cleanEnv({ MESH_BROKER_URL: nats.url });
  const revoked = await runTackle(["mesh", "revoke", "b", "beta"], { env });
  assert.equal(revoked.code, 0, revoked.stderr);
  assert.equal(revoked.stdout, "revoked beta on b\n");
  const tools = await runTackle(["tools", "--json"], { env });
  assert.deepEqual(
    (JSON.parse(tools.stdout) as { module: string }[]).map((info) => info.module),
    ["alpha"],
    "a module no node holds and nothing serves is gone from the mesh, by the admin's decision",
  );
  const again = await runTackle(["mesh", "revoke", "b", "beta"], { env });
  assert.equal(again.code, 1);
  assert.match(again.stderr, /No membership of module beta on node b/);
});
