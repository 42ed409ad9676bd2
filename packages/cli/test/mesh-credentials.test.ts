/**
 * `tackle mesh init | issue --creds | issue-client | revoke` as processes (ADR 0209): the issuer's
 * folder starts a broker in operator mode, a node serves on the credential `issue` wrote, a client's
 * credential calls what it names and no other module, and `revoke` cuts both off within 2 s.
 */
import assert from "node:assert/strict";
import { statSync } from "node:fs";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { fileURLToPath } from "node:url";
import { connectMesh, loadMeshConfig, type NodeRuntime, startNodeRuntime } from "@tackle/mesh";
import { type NatsServerHandle, startNatsServer, underLoadMs } from "@tackle/test-support";
import { cleanEnv, runTackle, tempHome } from "./tackle-process.ts";

const whoami = fileURLToPath(new URL("./fixtures/whoami-bundle.ts", import.meta.url));
const home = tempHome();
const meshHome = join(home.path, "mesh");
let nats: NatsServerHandle;
let runtime: NodeRuntime | undefined;

const env = (extra: Record<string, string> = {}) =>
  cleanEnv({ TACKLE_HOME: home.path, MESH_BROKER_URL: nats.url, ...extra });

before(async () => {
  const init = await runTackle(["mesh", "init"], { env: cleanEnv({ TACKLE_HOME: home.path }) });
  assert.equal(init.code, 0, init.stderr);
  assert.match(init.stdout, /nats-server -js -c .*server\.conf/);
  assert.equal(statSync(meshHome).mode & 0o777, 0o700);
  assert.equal(statSync(join(meshHome, "authority.json")).mode & 0o777, 0o600);
  nats = await startNatsServer({ extraArgs: ["-c", join(meshHome, "server.conf")] });
});
after(async () => {
  await runtime?.close();
  await nats?.close();
  home.remove();
});

it("issues a node's and a client's credentials, and revokes them within 2 s", async () => {
  const issuer = { MESH_BROKER_FILE: join(meshHome, "issuer.creds") };
  const nodeCreds = join(home.path, "node-a.creds");
  for (const [node, module] of [
    ["node-a", "whoami"],
    ["node-b", "other"],
  ] as const) {
    const issued = await runTackle(
      ["mesh", "issue", node, module, ...(node === "node-a" ? ["--creds", nodeCreds] : [])],
      { env: env(issuer) },
    );
    assert.equal(issued.code, 0, issued.stderr);
  }
  assert.equal(statSync(nodeCreds).mode & 0o777, 0o600);
  runtime = await startNodeRuntime({
    config: loadMeshConfig({
      MESH_NODE: "node-a",
      MESH_BROKER_URL: nats.url,
      MESH_BROKER_FILE: nodeCreds,
      MESH_TOOL_MODULES: whoami, // a bare path: the credential's own module
    }),
  });
  const clientCreds = join(home.path, "console.creds");
  const client = await runTackle(
    ["mesh", "issue-client", "console", "--call", "whoami", "--creds", clientCreds],
    {
      env: env(issuer),
    },
  );
  assert.equal(client.code, 0, client.stderr);
  const asClient = env({ MESH_BROKER_FILE: clientCreds });
  const called = await runTackle(["call", "whoami.whoami", "{}"], { env: asClient });
  assert.equal(called.code, 0, called.stderr);
  assert.match(called.stdout, /node-a/);
  const refused = await runTackle(["call", "other.anything", "{}"], { env: asClient });
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /forbidden/);
  // The client cannot issue: memberships are the issuer's alone.
  const forged = await runTackle(["mesh", "issue", "node-a", "other"], { env: asClient });
  assert.notEqual(forged.code, 0);
  assert.match(forged.stderr, /permission/i);

  // Revoking the module on the node revokes the node's credential: its connection is cut off.
  const nodeConnection = await connectMesh({ servers: nats.url, credsFile: nodeCreds });
  const cutOff = (async () => {
    for await (const status of nodeConnection.status()) if (status.type === "disconnect") return Date.now();
    return Date.now();
  })();
  const revoked = await runTackle(["mesh", "revoke", "node-a", "whoami"], { env: env(issuer) });
  const revokedAt = Date.now();
  assert.equal(revoked.code, 0, revoked.stderr);
  assert.match(revoked.stdout, /revoked whoami on node-a\nrevoked credential U[A-Z2-7]{55}\n/);
  // Prompt: 2 s on a quiet machine, scaled by load (the broker and this process wait for a core too).
  const timeout = new Promise<number>((resolve) =>
    setTimeout(() => resolve(Number.POSITIVE_INFINITY), underLoadMs(5000)),
  );
  const cutAfter = (await Promise.race([cutOff, timeout])) - revokedAt;
  assert.ok(
    cutAfter < underLoadMs(2000),
    `the node's connection cut off ${cutAfter} ms after the revoke returned`,
  );
  await nodeConnection.close();

  const revokedClient = await runTackle(["mesh", "revoke", "--credential", clientCreds], {
    env: env(issuer),
  });
  assert.equal(revokedClient.code, 0, revokedClient.stderr);
  const after = await runTackle(["call", "whoami.whoami", "{}"], { env: asClient });
  assert.notEqual(after.code, 0);
  assert.match(after.stderr, /authoriz|revoked/i);
});
