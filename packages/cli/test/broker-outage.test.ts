/**
 * `tackle call` whose reply is lost in a broker outage: the node finishes the tool while the broker is
 * frozen, the broker is killed and restarted on its port, and the call exits 1 with `reply_lost`
 * naming the node (it ran), soon after the restart instead of at its 30 s time limit.
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
      MESH_NODE: "steady",
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

test("tackle call exits 1 with reply_lost, naming the node, when its reply dies with the broker", async () => {
  const { call } = await slowCallSent(nats.url, home.path, 3000);
  // Frozen while the tool runs: its reply, three seconds later, waits unread in the broker's socket,
  // and the kill loses it.
  await new Promise((resolve) => setTimeout(resolve, 100));
  await nats.signal("SIGSTOP");
  await new Promise((resolve) => setTimeout(resolve, 4000));
  await nats.signal("SIGKILL");
  await nats.stop();
  await nats.restart();
  const restartedAt = performance.now();
  const finished = await call;
  const afterRestart = performance.now() - restartedAt;
  assert.equal(finished.code, 1, finished.stderr);
  assert.match(finished.stderr, /error reply_lost: Node steady ran "slow\.wait" to its end \(it succeeded\)/);
  assert.match(finished.stderr, /it ran, so check before calling again/);
  assert.match(finished.stderr, /"outcome": "ok"/);
  assert.equal(finished.stdout, "");
  // Well before the call's 30 s limit.
  assert.ok(afterRestart < 10_000, `exited ${Math.round(afterRestart)} ms after the restart`);
});
