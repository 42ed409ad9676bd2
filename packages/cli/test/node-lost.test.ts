/**
 * `tackle call` to a tool whose node is SIGKILLed mid-call: it fails within seconds with `node_lost`
 * naming the node (exit 1, the error on stderr), instead of waiting out its 30 s time limit.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import { cleanEnv, type ServeProcess, slowCallSent, startServe, tempHome } from "./tackle-process.ts";

const slowBundle = fileURLToPath(new URL("./fixtures/slow-bundle.mjs", import.meta.url));
const home = tempHome();
let nats: NatsServerHandle;
let node: ServeProcess;

before(async () => {
  nats = await startNatsServer();
  node = await startServe(
    ["--no-console"],
    cleanEnv({
      MESH_BROKER_URL: nats.url,
      TACKLE_HOME: home.path,
      MESH_NODE: "doomed",
      MESH_TOOL_MODULES: `slow=${slowBundle}`,
    }),
    /module slow: ok/,
  );
});

after(async () => {
  await node?.stop("SIGKILL");
  await nats?.close();
  home.remove();
});

test("tackle call exits 1 with node_lost, naming the node, soon after the node running it is SIGKILLed", async () => {
  const { call } = await slowCallSent(nats.url, home.path, 10000);
  // The node has the request (it reads it as the bystander does); give it a moment to start the tool.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const killedAt = performance.now();
  await node.stop("SIGKILL");
  const finished = await call;
  const afterKill = performance.now() - killedAt;
  assert.equal(finished.code, 1, finished.stderr);
  assert.match(finished.stderr, /error node_lost: Node doomed, which was running "slow\.wait", is gone/);
  assert.match(finished.stderr, /the tool may have run, so check before calling again/);
  assert.match(finished.stderr, /"node": "doomed"/);
  assert.equal(finished.stdout, "");
  // Well before the tool's own 10 s and the call's 30 s limit.
  assert.ok(afterKill < 6000, `exited ${Math.round(afterKill)} ms after the kill`);
});
