/**
 * On a three-server NATS cluster, the node's server dies while the client's lives (ADR 0208): the node
 * reconnects to another server, and the client, which saw no outage of its own, still learns what
 * became of its calls: the one whose request died in that server fails `not_delivered`, the one whose
 * reply died there `reply_lost`, the one still running returns its result; none runs twice.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import type { ToolCallResult } from "@tackle/core";
import { type NatsClusterHandle, startNatsCluster } from "@tackle/test-support";
import {
  connectMesh,
  createMeshClient,
  type MeshClient,
  type NatsConnection,
  type NodeRuntime,
  startNodeRuntime,
} from "../src/index.ts";
import { eventually, fixture, meshConfig } from "./helpers.ts";

interface Gates {
  readonly runs: Map<string, number>;
  readonly open: Map<string, () => void>;
}
const gates = (): Gates => (globalThis as { meshGates?: Gates }).meshGates as Gates;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let cluster: NatsClusterHandle;
let nodeConnection: NatsConnection;
let runtime: NodeRuntime;
let client: MeshClient;
before(async () => {
  cluster = await startNatsCluster({ size: 3 });
  const [first, second, third] = cluster.servers;
  assert.ok(first && second && third);
  // The client is on the first server only; the node on the second or the third.
  client = await createMeshClient({ servers: first.url, timeoutMs: 30_000 });
  nodeConnection = await connectMesh({ servers: `${second.url},${third.url}`, name: "node-c" });
  runtime = await startNodeRuntime({
    connection: nodeConnection,
    config: meshConfig("node-c", second.url, [{ module: "gated", path: fixture("gated.mjs") }]),
  });
});
after(async () => {
  await client?.close();
  await runtime?.close();
  await nodeConnection?.close();
  await cluster?.close();
});

function call(key: string) {
  const startedAt = performance.now();
  return client
    .call("gated.wait", { key })
    .then((result: ToolCallResult) => ({ result, at: performance.now(), ms: performance.now() - startedAt }));
}

it("tells the client's calls what became of them when the node's server dies and the client's lives", {
  timeout: 120_000,
}, async () => {
  const warm = call("c-warm");
  await eventually("the module serving", async () => gates()?.open.get("c-warm"), 30_000);
  gates().open.get("c-warm")?.();
  assert.equal((await warm).result.ok, true);

  const running = call("c-running");
  const finished = call("c-finished");
  await eventually("both calls running in the tool", async () =>
    gates().open.has("c-running") && gates().open.has("c-finished") ? true : undefined,
  );
  const nodeServer = cluster.servers.find((server) => nodeConnection.getServer().endsWith(`:${server.port}`));
  assert.ok(nodeServer, `the node's server ${nodeConnection.getServer()}`);

  // Frozen, the node's server reads nothing: the node's reply and the next request (routed to it
  // from the client's server) wait unread, and the kill loses both. The client's server lives.
  await nodeServer.signal("SIGSTOP");
  gates().open.get("c-finished")?.();
  const lost = call("c-lost");
  await sleep(500);
  await nodeServer.kill();
  const killedAt = performance.now();

  const [lostOutcome, finishedOutcome] = await Promise.all([lost, finished]);
  assert.equal(lostOutcome.result.ok, false);
  if (!lostOutcome.result.ok) {
    assert.equal(lostOutcome.result.error.code, "not_delivered", lostOutcome.result.error.message);
    assert.equal(lostOutcome.result.error.retryable, true);
    assert.match(lostOutcome.result.error.message, /node node-c's connection to NATS dropped/);
  }
  assert.equal(finishedOutcome.result.ok, false);
  if (!finishedOutcome.result.ok) {
    assert.equal(finishedOutcome.result.error.code, "reply_lost", finishedOutcome.result.error.message);
    assert.deepEqual(finishedOutcome.result.error.data, {
      tool: "gated.wait",
      node: "node-c",
      outcome: "ok",
    });
  }
  for (const outcome of [lostOutcome, finishedOutcome]) {
    const afterKill = outcome.at - killedAt;
    assert.ok(
      afterKill < 10_000,
      `settled ${Math.round(afterKill)} ms after the kill, not at the 30 s deadline`,
    );
  }

  gates().open.get("c-running")?.();
  assert.deepEqual((await running).result, { ok: true, output: { key: "c-running" } });
  assert.equal(gates().runs.get("c-lost"), undefined);
  assert.equal(gates().runs.get("c-finished"), 1);
  assert.equal(gates().runs.get("c-running"), 1);
});
