/**
 * The NATS server dies with calls in flight and comes back on the same port (ADR 0208): a call still
 * running finishes, one that finished while its reply was lost fails `reply_lost`, one lost inside
 * the dead broker fails `not_delivered` — each well before its deadline, and none runs twice. A
 * client whose broker stays down fails its call `disconnected` at the deadline.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import type { ToolCallResult } from "@tackle/core";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import { createMeshClient, type MeshClient, type NodeRuntime, startNodeRuntime } from "../src/index.ts";
import { eventually, fixture, meshConfig } from "./helpers.ts";

interface Gates {
  readonly runs: Map<string, number>;
  readonly open: Map<string, () => void>;
}
const gates = (): Gates => (globalThis as { meshGates?: Gates }).meshGates as Gates;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Each call's own deadline: every outcome below must come long before it. */
const deadlineMs = 30_000;

let nats: NatsServerHandle;
let runtime: NodeRuntime;
let client: MeshClient;
before(async () => {
  nats = await startNatsServer();
  runtime = await startNodeRuntime({
    config: meshConfig("node-o", nats.url, [{ module: "gated", path: fixture("gated.mjs") }]),
  });
  client = await createMeshClient({ servers: nats.url, timeoutMs: deadlineMs });
});
after(async () => {
  await client?.close();
  await runtime?.close();
  await nats?.close();
});

/** Calls `gated.wait` with `key`; resolves with its result and how long after `since()` it came. */
function call(key: string, since: () => number, signal?: AbortSignal) {
  return client
    .call("gated.wait", { key }, signal === undefined ? {} : { signal })
    .then((result: ToolCallResult) => ({ result, after: performance.now() - since() }));
}

it("tells each call caught by a broker restart what became of it, before its deadline, running none twice", async () => {
  const warm = call("warm", () => 0);
  await eventually("the module serving", async () => gates()?.open.get("warm"));
  gates().open.get("warm")?.();
  assert.deepEqual((await warm).result, { ok: true, output: { key: "warm" } });

  let restartedAt = Number.NaN;
  const since = () => restartedAt;
  const running = call("running", since);
  const finished = call("finished", since);
  const abort = new AbortController();
  const aborted = call("aborted", () => 0, abort.signal);
  await eventually("the calls running in the tool", async () =>
    ["running", "finished", "aborted"].every((key) => gates().open.has(key)) ? true : undefined,
  );

  // Frozen, the broker reads nothing more: the node's reply and the next request wait unread in its
  // sockets, and the kill loses both.
  await nats.signal("SIGSTOP");
  gates().open.get("finished")?.();
  const lost = call("lost", since);
  await sleep(300);
  await nats.signal("SIGKILL");
  await nats.stop();
  // A caller's abort is honoured while the broker is down.
  const abortedAt = performance.now();
  abort.abort();
  const abortedOutcome = await aborted;
  assert.ok(abortedOutcome.after - abortedAt < 1000, "aborted at once");
  assert.equal(abortedOutcome.result.ok ? "ok" : abortedOutcome.result.error.code, "aborted");
  await sleep(1000);
  await nats.restart();
  restartedAt = performance.now();

  const [lostOutcome, finishedOutcome] = await Promise.all([lost, finished]);
  assert.equal(lostOutcome.result.ok, false);
  if (!lostOutcome.result.ok) {
    assert.equal(lostOutcome.result.error.code, "not_delivered", lostOutcome.result.error.message);
    assert.equal(lostOutcome.result.error.retryable, true);
    assert.match(lostOutcome.result.error.message, /it did not run/);
    assert.deepEqual(lostOutcome.result.error.data, { tool: "gated.wait", nodes: ["node-o"] });
  }
  assert.equal(finishedOutcome.result.ok, false);
  if (!finishedOutcome.result.ok) {
    assert.equal(finishedOutcome.result.error.code, "reply_lost", finishedOutcome.result.error.message);
    assert.equal(finishedOutcome.result.error.retryable, false);
    assert.deepEqual(finishedOutcome.result.error.data, {
      tool: "gated.wait",
      node: "node-o",
      outcome: "ok",
    });
  }
  // Seconds after the broker is back, not at the 30 s deadline.
  for (const outcome of [lostOutcome, finishedOutcome])
    assert.ok(outcome.after < 10_000, `settled ${Math.round(outcome.after)} ms after the restart`);

  // The call still running on the node was neither failed nor lost: its reply comes when it ends.
  let runningSettled = false;
  void running.then(() => {
    runningSettled = true;
  });
  await sleep(500);
  assert.equal(runningSettled, false, "the running call waits for its tool");
  gates().open.get("running")?.();
  assert.deepEqual((await running).result, { ok: true, output: { key: "running" } });

  // The lost call never ran; called again (as not_delivered invites), it runs once.
  assert.equal(gates().runs.get("lost"), undefined);
  const again = call("lost", since);
  await eventually("the retried call running", async () => gates().open.get("lost"));
  gates().open.get("lost")?.();
  assert.deepEqual((await again).result, { ok: true, output: { key: "lost" } });
  gates().open.get("aborted")?.();
  assert.deepEqual(Object.fromEntries(gates().runs), {
    warm: 1,
    running: 1,
    finished: 1,
    aborted: 1,
    lost: 1,
  });
});

it("fails a call whose broker stays down `disconnected` by its deadline, saying the broker is unreachable", async () => {
  const short = await createMeshClient({ servers: nats.url, timeoutMs: 3000 });
  try {
    const pending = short.call("gated.wait", { key: "stranded" });
    await eventually("the call running", async () => gates().open.get("stranded"));
    const sentAt = performance.now();
    await nats.stop();
    const result = await pending;
    const waited = performance.now() - sentAt;
    assert.equal(result.ok, false);
    if (!result.ok) {
      assert.equal(result.error.code, "disconnected", result.error.message);
      assert.match(result.error.message, /is still unreachable; it may or may not have run/);
      assert.equal(result.error.retryable, true);
    }
    // Its deadline (3 s, and the second the bus gives the node's own timeout error), not later.
    assert.ok(waited < 5000, `failed ${Math.round(waited)} ms after the broker stopped`);
  } finally {
    gates().open.get("stranded")?.();
    await nats.restart();
    await short.close();
  }
});
