/**
 * The mesh on a three-server NATS cluster (routes, clustered JetStream, R3 KV), with two node
 * processes serving one bundle: calls are load-balanced; killing a NATS server under load keeps
 * membership and catalogue and every call settles (ok, or a retryable failure) before its deadline;
 * SIGKILL of a node fails only the calls it held (`node_lost`, before their deadline).
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { after, before, it, type TestContext } from "node:test";
import type { ToolCallResult } from "@tackle/core";
import { type NatsClusterHandle, startNatsCluster } from "@tackle/test-support";
import {
  createMeshClient,
  issueMembership,
  listMemberships,
  type MeshClient,
  openMeshBuckets,
  readCatalogue,
  revokeMembership,
} from "../src/index.ts";
import { eventually, startPoolNode } from "./helpers.ts";

let cluster: NatsClusterHandle;
const nodes: ChildProcess[] = [];
before(async () => {
  cluster = await startNatsCluster({ size: 3 });
});
after(async () => {
  for (const node of nodes) if (node.exitCode === null && node.signalCode === null) node.kill("SIGKILL");
  await cluster?.close();
});

const startNode = (name: string, urls: string) => startPoolNode(name, urls, nodes);

interface Outcome {
  readonly result: ToolCallResult;
  readonly startedAt: number;
  readonly ms: number;
}

const retryableCodes = new Set(["disconnected", "unavailable", "timeout", "unreachable", "not_delivered"]);

type PoolNode = Awaited<ReturnType<typeof startNode>>;

/** Memberships for both nodes in R3 buckets, then the two node processes. */
async function startTwoNodes(client: MeshClient): Promise<[PoolNode, PoolNode]> {
  // Created once by the operator with three replicas; nodes opening them later keep that.
  const buckets = await openMeshBuckets(client.connection, { replicas: 3 });
  assert.equal((await buckets.membership.status()).replicas, 3);
  assert.equal((await buckets.catalogue.status()).replicas, 3);
  for (const node of ["node-a", "node-b"]) await issueMembership(client.connection, { node, module: "pool" });

  // Each node lists the cluster's servers in its own order.
  const urls = cluster.servers.map((server) => server.url);
  return Promise.all([
    startNode("node-a", urls.join(",")),
    startNode("node-b", [...urls.slice(1), urls[0]].join(",")),
  ]);
}

async function assertLoadBalanced(client: MeshClient, a: PoolNode, b: PoolNode) {
  // Load-balanced: both processes answer calls to the one module.
  const answered = await eventually(
    "answers from both nodes",
    async () => {
      const pids = new Set<number>();
      for (let index = 0; index < 40; index++) {
        const result = await client.call("pool.whoami", {});
        if (result.ok) pids.add((result.output as { pid: number }).pid);
      }
      return pids.size === 2 ? pids : undefined;
    },
    30_000,
  );
  assert.deepEqual([...answered].sort(), [a.pid, b.pid].sort());
}

async function killNatsServerUnderLoad(client: MeshClient, t: TestContext) {
  // Kill one NATS server (SIGKILL) while four callers keep calling.
  const outcomes: Outcome[] = [];
  let loading = true;
  const callers = Array.from({ length: 4 }, async () => {
    while (loading) {
      const startedAt = Date.now();
      const result = await client.call("pool.whoami", {});
      outcomes.push({ result, startedAt, ms: Date.now() - startedAt });
      if (!result.ok) await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });
  await new Promise((resolve) => setTimeout(resolve, 1000));
  // The server the client is on: its calls in flight are cut, and it must reconnect to another.
  const current = client.connection.getServer();
  const victim = cluster.servers.find((server) => server.url.endsWith(`:${current.split(":").at(-1)}`));
  assert.ok(victim, `the client's server ${current}`);
  await victim.kill();
  const killedAt = Date.now();
  await eventually(
    "calls succeeding after the kill",
    async () =>
      outcomes.filter((outcome) => outcome.startedAt > killedAt + 500 && outcome.result.ok).length >= 20
        ? true
        : undefined,
    30_000,
  );
  loading = false;
  await Promise.all(callers);
  for (const { result, ms } of outcomes) {
    // None hangs: the call's limit is 4 s, the bus waits one more second.
    assert.ok(ms < 4000 + 1000 + 1500, `a call took ${ms} ms`);
    if (result.ok) continue;
    // A node cut off from the bus for longer than the client's watch allows loses its calls; one
    // whose reply died with the server says it ran (ADR 0208). Neither is retryable.
    if (result.error.code === "node_lost" || result.error.code === "reply_lost") continue;
    assert.ok(retryableCodes.has(result.error.code), `${result.error.code}: ${result.error.message}`);
    assert.equal(result.error.retryable, true, result.error.message);
  }
  assert.ok(outcomes.some((outcome) => outcome.startedAt < killedAt && outcome.result.ok));
  const failures = outcomes.filter((outcome) => !outcome.result.ok);
  t.diagnostic(
    `NATS server killed: ${outcomes.length} calls, ${failures.length} failed (${[
      ...new Set(failures.map((outcome) => (outcome.result.ok ? "" : outcome.result.error.code))),
    ].join(", ")}), slowest ${Math.max(...outcomes.map((outcome) => outcome.ms))} ms`,
  );
}

async function assertBucketsSurviveTheKill(client: MeshClient) {
  // Membership and catalogue survive on the two remaining replicas, and still take writes. A read
  // may time out while the remaining servers elect a new JetStream leader (seconds); it is retried.
  const members = await eventually(
    "membership read after the kill",
    async () => (await listMemberships(client.connection, { module: "pool" })).map((record) => record.node),
    30_000,
  );
  assert.deepEqual(members, ["node-a", "node-b"]);
  const catalogue = await eventually(
    "catalogue read after the kill",
    async () => (await readCatalogue(client.connection)).map((record) => record.module),
    30_000,
  );
  assert.deepEqual(catalogue, ["pool"]);
  await eventually(
    "a membership write after the kill",
    async () => (await issueMembership(client.connection, { node: "node-c", module: "pool" })).node,
    30_000,
  );
  // A revoke whose first try deleted the record and then timed out is retried and finds it gone
  // (false): what must hold is the state, node-c holds nothing once the revocation has been taken.
  await eventually(
    "a revocation after the kill",
    async () => {
      await revokeMembership(client.connection, { node: "node-c", module: "pool" });
      const left = await listMemberships(client.connection, { node: "node-c" });
      return left.length === 0 ? true : undefined;
    },
    30_000,
  );
}

async function killNodeWithCallsInFlight(client: MeshClient, a: PoolNode, b: PoolNode, t: TestContext) {
  // SIGKILL node A while slow calls are in flight on both nodes.
  const slow = Array.from({ length: 12 }, () => client.call("pool.slow", { ms: 1500 }));
  await new Promise((resolve) => setTimeout(resolve, 500));
  a.process.kill("SIGKILL");
  const results = await Promise.all(slow);
  const served = results.filter((result) => result.ok);
  const failed = results.filter((result) => !result.ok);
  // Those on node B finish; those node A held fail node_lost (they may have run: not retryable)
  // before their deadline; no other call fails.
  t.diagnostic(
    `node SIGKILL: ${served.length} slow calls finished on node B, ${failed.length} failed (${failed
      .map((result) => (result.ok ? "" : result.error.code))
      .join(", ")})`,
  );
  for (const result of served) assert.equal((result.output as { pid: number }).pid, b.pid);
  assert.ok(served.length >= 1 && failed.length >= 1, `served ${served.length}, failed ${failed.length}`);
  for (const result of failed) {
    if (result.ok) continue;
    assert.equal(result.error.code, "node_lost", result.error.message);
    assert.equal(result.error.retryable, false);
    assert.equal((result.error.data as { node: string }).node, "node-a");
  }
  // After the kill, node B takes every call.
  for (let index = 0; index < 10; index++) {
    const result = await client.call("pool.whoami", {});
    assert.ok(result.ok, result.ok ? "" : result.error.message);
    assert.equal((result.output as { pid: number }).pid, b.pid);
  }
}

it("load-balances two nodes, survives a NATS server's death under load, and a node's SIGKILL fails only its calls", {
  timeout: 170_000,
}, async (t) => {
  const client = await createMeshClient({ servers: cluster.urls, timeoutMs: 4000 });
  try {
    const [a, b] = await startTwoNodes(client);
    await assertLoadBalanced(client, a, b);
    await killNatsServerUnderLoad(client, t);
    await assertBucketsSurviveTheKill(client);
    await killNodeWithCallsInFlight(client, a, b, t);
  } finally {
    await client.close();
  }
});
