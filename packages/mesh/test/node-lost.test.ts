/**
 * A call held by a node that dies fails `node_lost` within seconds, naming the node, instead of
 * waiting out its deadline: two node processes serve one module; one is SIGKILLed mid-call. Calls on
 * the survivor, and a call that is merely slow, finish. A call swallowed by a node that went away
 * before it started (a queue member that never ran it) fails `node_lost` too. Neither a module moving
 * to another prefix mid-call, nor a node busy in synchronous work past the bound (alive: NATS still
 * holds its connection), nor the client's own event loop stalling past the bound fails a call.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, it } from "node:test";
import { connect } from "@nats-io/transport-node";
import type { ToolCallResult } from "@tackle/core";
import { type NatsServerHandle, startNatsServer, underLoadMs } from "@tackle/test-support";
import { defaultModulePrefix } from "../src/config/names.ts";
import { createMeshClient, issueMembership, type MeshClient, startNodeRuntime } from "../src/index.ts";
import { eventually, fixture, meshConfig, startPoolNode } from "./helpers.ts";

let nats: NatsServerHandle;
let client: MeshClient;
const nodes: ChildProcess[] = [];

before(async () => {
  nats = await startNatsServer();
  client = await createMeshClient({ servers: nats.url, timeoutMs: 30_000 });
});
after(async () => {
  for (const node of nodes) if (node.exitCode === null && node.signalCode === null) node.kill("SIGKILL");
  await client?.close();
  await nats?.close();
});

/** Starts a node serving `pool` on the suite's NATS server. */
const startNode = (name: string) => startPoolNode(name, nats.url, nodes);

interface Timed {
  readonly result: ToolCallResult;
  /** When it settled, in performance.now() time. */
  readonly at: number;
}

const timed = (call: Promise<ToolCallResult>): Promise<Timed> =>
  call.then((result) => ({ result, at: performance.now() }));

it("a node's SIGKILL fails the calls it held node_lost within seconds, naming it; the survivor's slow calls finish", {
  timeout: 120_000,
}, async (t) => {
  const [a, b] = await Promise.all([startNode("a"), startNode("b")]);
  // Both serve: the queue group spreads calls over them.
  const pids = new Set<number>();
  for (let index = 0; index < 40 && pids.size < 2; index++) {
    const result = await client.call("pool.whoami", {});
    assert.ok(result.ok, result.ok ? "" : result.error.message);
    pids.add((result.output as { pid: number }).pid);
  }
  assert.equal(pids.size, 2, "both nodes answer");

  // Each call takes 6 s, longer than the watch lets a silent holder go (2.5 s): a slow call on a live
  // node is not failed early. The deadline is 30 s.
  const calls = Array.from({ length: 12 }, () => timed(client.call("pool.slow", { ms: 6000 })));
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const killedAt = performance.now();
  a.process.kill("SIGKILL");
  const settled = await Promise.all(calls);
  const served = settled.filter(({ result }) => result.ok);
  const lost = settled.filter(({ result }) => !result.ok);
  t.diagnostic(
    `node a SIGKILLed: ${served.length} calls finished on node b; ${lost.length} failed, after ${lost
      .map(({ at }) => `${((at - killedAt) / 1000).toFixed(1)} s`)
      .join(", ")}`,
  );
  assert.ok(served.length >= 1 && lost.length >= 1, `served ${served.length}, lost ${lost.length}`);
  for (const { result } of served) if (result.ok) assert.equal((result.output as { pid: number }).pid, b.pid);
  for (const { result, at } of lost) {
    if (result.ok) continue;
    assert.equal(result.error.code, "node_lost", result.error.message);
    assert.equal(result.error.retryable, false);
    assert.match(result.error.message, /Node a, which was running "pool\.slow", is gone/);
    assert.match(result.error.message, /may have run/);
    assert.deepEqual(result.error.data, { tool: "pool.slow", node: "a", started: true });
    // Well under the 30 s deadline, and before the survivor's 6 s calls end.
    assert.ok(at - killedAt < 5000, `failed ${Math.round(at - killedAt)} ms after the kill`);
  }

  // The survivor takes every call after the kill.
  for (let index = 0; index < 5; index++) {
    const result = await client.call("pool.whoami", {});
    assert.ok(result.ok, result.ok ? "" : result.error.message);
    assert.equal((result.output as { pid: number }).pid, b.pid);
  }
});

it("a call swallowed by a node that went away before running it fails node_lost; while that node answers, it waits", {
  timeout: 60_000,
}, async () => {
  // A stand-in node: it joins the module's queue group and answers which calls it holds (none),
  // as a node does between receiving a call and starting it, and then its connection goes away.
  const prefix = defaultModulePrefix("ghost");
  const ghost = await connect({ servers: nats.url, name: "ghost node" });
  try {
    ghost.subscribe(`${prefix}.echo`, { queue: "q", callback: () => {} });
    ghost.subscribe(`${prefix}.tools.held`, {
      callback: (_error, message) => {
        message.respond(JSON.stringify({ prefix, node: "ghost", instance: "one", held: [] }));
      },
    });
    await ghost.flush();
    const call = timed(client.call("ghost.echo", {}, { timeoutMs: 30_000 }));
    // While the node answers, a call nobody claims is not judged lost (there is no node to name).
    const early = await Promise.race([
      call,
      new Promise<"pending">((resolve) => setTimeout(() => resolve("pending"), 4000)),
    ]);
    assert.equal(early, "pending");
    const goneAt = performance.now();
    await ghost.close();
    const { result, at } = await call;
    assert.ok(!result.ok);
    assert.equal(result.error.code, "node_lost", result.error.message);
    assert.equal(result.error.retryable, false);
    assert.match(result.error.message, /"ghost\.echo" was sent as node ghost went away/);
    assert.deepEqual(result.error.data, { tool: "ghost.echo", node: "ghost", started: "unknown" });
    assert.ok(at - goneAt < 5000, `failed ${Math.round(at - goneAt)} ms after the node went away`);
  } finally {
    if (!ghost.isClosed()) await ghost.close();
  }
});

it("a call taken by a node that went away before any question reached it fails node_lost once nothing serves the module; while that node is connected, it waits", {
  timeout: 60_000,
}, async () => {
  // A stand-in for a node that is busy from the moment the call arrives: it holds its subscriptions
  // (so NATS still routes to them) but answers no question, so the watch never learns its name.
  const prefix = defaultModulePrefix("mute");
  const mute = await connect({ servers: nats.url, name: "mute node" });
  try {
    mute.subscribe(`${prefix}.echo`, { queue: "q", callback: () => {} });
    mute.subscribe(`${prefix}.tools.held`, { callback: () => {} });
    await mute.flush();
    const call = timed(client.call("mute.echo", {}, { timeoutMs: 30_000 }));
    // Connected and silent: busy, not gone (it was a 30 s timeout before, too).
    const early = await Promise.race([
      call,
      new Promise<"pending">((resolve) => setTimeout(() => resolve("pending"), 4000)),
    ]);
    assert.equal(early, "pending");
    const goneAt = performance.now();
    await mute.close();
    const { result, at } = await call;
    assert.ok(!result.ok);
    assert.equal(result.error.code, "node_lost", result.error.message);
    assert.equal(result.error.retryable, false);
    assert.match(result.error.message, /"mute\.echo" was sent to a node that went away before it answered/);
    assert.deepEqual(result.error.data, { tool: "mute.echo", started: "unknown" });
    // Its deadline was 30 s: the verdict comes within a few probes of the node's going.
    assert.ok(
      at - goneAt < underLoadMs(5000),
      `failed ${Math.round(at - goneAt)} ms after the node went away`,
    );
  } finally {
    if (!mute.isClosed()) await mute.close();
  }
});

it("a node process that SIGKILLs itself in the first call a client makes to it fails that call node_lost, not at its deadline", {
  timeout: 120_000,
}, async () => {
  // A client that has never heard this node: whichever of the watch's two paths sees it go, the call
  // must not wait out its 30 s deadline.
  const fresh = await createMeshClient({ servers: nats.url, timeoutMs: 30_000 });
  const file = path.join(mkdtempSync(path.join(tmpdir(), "tackle-node-lost-")), "effects.log");
  try {
    const node = await startPoolNode("dying", nats.url, nodes, {
      module: "effects",
      path: fixture("effects.mjs"),
    });
    const startedAt = performance.now();
    const result = await fresh.call("effects.apply", { file, id: "one", dieAfter: true });
    const took = performance.now() - startedAt;
    assert.ok(!result.ok, "the node died in the call");
    assert.equal(result.error.code, "node_lost", `${result.error.code}: ${result.error.message}`);
    assert.ok(took < underLoadMs(10_000), `failed after ${Math.round(took)} ms`);
    await eventually("the node process exited", async () =>
      node.process.signalCode === "SIGKILL" ? true : undefined,
    );
    assert.match(readFileSync(file, "utf8"), /^one dying /, "the tool ran before the node died");
  } finally {
    await fresh.close();
    rmSync(path.dirname(file), { recursive: true, force: true });
  }
});

it("a node whose tool blocks its event loop for longer than lostAfterMs is busy, not lost: the call finishes", {
  timeout: 60_000,
}, async () => {
  // Node b (from the first test) still serves pool, alone. Its tool computes synchronously for 6 s:
  // the node cannot answer which calls it holds, but its connection stays, so NATS still routes to
  // its subscriptions and the client, with its defaults, keeps waiting.
  // Blocked at once (the node has not yet claimed the call), then blocked after it claimed it.
  for (const input of [{ ms: 6000 }, { ms: 6000, waitMs: 1500 }]) {
    const startedAt = performance.now();
    const result = await client.call("pool.block", input);
    assert.ok(
      result.ok,
      result.ok ? "" : `${JSON.stringify(input)}: ${result.error.code}: ${result.error.message}`,
    );
    assert.ok(performance.now() - startedAt >= 6000);
  }
  // Then it answers as before.
  const next = await client.call("pool.whoami", {});
  assert.ok(next.ok, next.ok ? "" : next.error.message);
});

it("a call running while its module moves to another prefix is still claimed, and finishes", {
  timeout: 60_000,
}, async () => {
  await issueMembership(client.connection, { node: "mover", module: "moving", prefix: "acme.one" });
  const runtime = await startNodeRuntime({
    config: meshConfig("mover", nats.url, [{ module: "moving", path: fixture("whoami.ts") }]),
  });
  try {
    const call = client.call("moving.slow", { ms: 5000 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    await issueMembership(client.connection, { node: "mover", module: "moving", prefix: "acme.two" });
    await eventually("the module re-served at acme.two", async () =>
      runtime.modules()[0]?.prefix === "acme.two" ? true : undefined,
    );
    // The call was sent on acme.one; the node answers for it there until it ends (past 2.5 s).
    const result = await call;
    assert.ok(result.ok, result.ok ? "" : `${result.error.code}: ${result.error.message}`);
  } finally {
    await runtime.close();
  }
});

it("a client too busy to ask for longer than lostAfterMs does not take its own silence for a lost node", {
  timeout: 60_000,
}, async () => {
  // Node b (from the first test) still serves pool.
  const call = client.call("pool.slow", { ms: 5000 });
  await new Promise((resolve) => setTimeout(resolve, 1000));
  // Block this process (the client) for 3.5 s inside a timer callback: the watch's own tick runs next,
  // before the node's answers are read.
  await new Promise<void>((resolve) => {
    setTimeout(() => {
      const until = performance.now() + 3500;
      while (performance.now() < until) {
        // busy: no timers, no socket reads
      }
      resolve();
    }, 0);
  });
  const result = await call;
  assert.ok(result.ok, result.ok ? "" : `${result.error.code}: ${result.error.message}`);
});
