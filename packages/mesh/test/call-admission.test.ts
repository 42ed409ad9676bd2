/**
 * A flood of legal calls costs a node what its limits allow (ADR 0214), over a real nats-server: with
 * two of the module's calls running at once and two waiting, the fifth and sixth calls sent together
 * are refused at once, `overloaded` and retryable; the waiting ones run in their turn as the running
 * ones end; a waiting call cancelled by its caller leaves the line and never runs; a waiting call whose
 * time limit is spent leaves it as a timeout and never runs, even when the event loop was held past
 * its deadline and its turn comes before its timer fires.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { type NatsServerHandle, startNatsServer, underLoadMs } from "@tackle/test-support";
import { createMeshClient, startNodeRuntime } from "../src/index.ts";
import { eventually, fixture, meshConfig } from "./helpers.ts";

type Gates = { runs: Map<string, number>; open: Map<string, () => void> };
const gates = (): Gates => (globalThis as { meshGates?: Gates }).meshGates as Gates;

let nats: NatsServerHandle;
before(async () => {
  nats = await startNatsServer();
});
after(async () => {
  await nats?.close();
});

it("runs two at once, keeps two waiting in order, refuses the rest at once; a cancelled wait never runs", async () => {
  const runtime = await startNodeRuntime({
    config: meshConfig("node-a", nats.url, [{ module: "gated", path: fixture("gated.mjs") }]),
    calls: { concurrent: 2, waiting: 2 },
  });
  // The node's refusals as they come: this client does not send a refused call again (ADR 0215).
  const client = await createMeshClient({ servers: nats.url, retryOverloaded: false });
  try {
    const cancelWaiting = new AbortController();
    const call = (key: string, signal?: AbortSignal) =>
      client.call("gated.wait", { key }, signal === undefined ? {} : { signal });
    // Sent in order on one connection, so they reach the node in order.
    const first = call("one");
    const second = call("two");
    await eventually("two calls running", async () => (gates()?.runs.size === 2 ? true : undefined));
    const third = call("three", cancelWaiting.signal);
    const fourth = call("four");
    const refused = await Promise.all([call("five"), call("six")]);
    for (const result of refused) {
      assert.equal(result.ok, false);
      assert.equal(!result.ok && result.error.code, "overloaded");
      assert.equal(!result.ok && result.error.retryable, true);
    }
    assert.deepEqual([...gates().runs.keys()], ["one", "two"], "only two run; the others wait");

    // The third, waiting, is cancelled by its caller: it leaves the line without running.
    cancelWaiting.abort();
    const cancelled = await third;
    assert.equal(!cancelled.ok && cancelled.error.code, "aborted");
    // The node hears of the cancel a moment later; from then a place in the line is free again and a
    // new call waits instead of being refused (a refused one never runs: it is sent again).
    let seventh: ReturnType<typeof call> | undefined;
    for (let attempt = 0; seventh === undefined; attempt += 1) {
      const candidate = call("seven");
      const early = await Promise.race([candidate, sleep(underLoadMs(300)).then(() => undefined)]);
      if (early === undefined) seventh = candidate;
      else {
        assert.equal(!early.ok && early.error.code, "overloaded");
        assert.ok(attempt < 50, "the cancelled call never left the line");
      }
    }

    gates().open.get("one")?.();
    assert.deepEqual(await first, { ok: true, output: { key: "one" } });
    await eventually("the fourth running in its turn", async () =>
      gates().runs.has("four") ? true : undefined,
    );
    assert.deepEqual([...gates().runs.keys()], ["one", "two", "four"]);
    gates().open.get("two")?.();
    await eventually("the seventh running", async () => (gates().runs.has("seven") ? true : undefined));
    gates().open.get("four")?.();
    gates().open.get("seven")?.();
    assert.deepEqual(await second, { ok: true, output: { key: "two" } });
    assert.deepEqual(await fourth, { ok: true, output: { key: "four" } });
    assert.deepEqual(await seventh, { ok: true, output: { key: "seven" } });
    assert.equal(gates().runs.has("three"), false, "the cancelled call never ran");
    assert.equal(gates().runs.has("five") || gates().runs.has("six"), false);
  } finally {
    await client.close();
    await runtime.close();
  }
});

it("a call that waits past its caller's time limit leaves the line as a timeout and never runs", async () => {
  const runtime = await startNodeRuntime({
    config: meshConfig("node-b", nats.url, [{ module: "gated", path: fixture("gated.mjs") }]),
    calls: { concurrent: 1, waiting: 4 },
  });
  const client = await createMeshClient({ servers: nats.url });
  try {
    const blocking = client.call("gated.wait", { key: "blocking" });
    await eventually("the first call running", async () =>
      gates()?.runs.has("blocking") ? true : undefined,
    );
    const started = performance.now();
    const late = await client.call("gated.wait", { key: "late" }, { timeoutMs: 300 });
    assert.equal(!late.ok && late.error.code, "timeout");
    assert.ok(performance.now() - started < underLoadMs(1_000), "answered at its limit, by the node");
    gates().open.get("blocking")?.();
    assert.deepEqual(await blocking, { ok: true, output: { key: "blocking" } });
    // Had it stayed in the line, it would have started as the first call ended.
    await sleep(underLoadMs(200));
    assert.equal(gates().runs.has("late"), false, "the expired call never ran");
  } finally {
    await client.close();
    await runtime.close();
  }
});

it("a call whose limit is spent while the node's event loop is held leaves the line as a timeout and never runs", async () => {
  const runtime = await startNodeRuntime({
    config: meshConfig("node-c", nats.url, [{ module: "scripted", path: fixture("scripted.mjs") }]),
    calls: { concurrent: 1, waiting: 1 },
  });
  const client = await createMeshClient({ servers: nats.url });
  const runs = () => (globalThis as { meshScripted?: { runs: { key: string }[] } }).meshScripted?.runs ?? [];
  try {
    // The running call waits, then computes past the waiting one's deadline without yielding: the
    // waiting call's timer is due by the time the running one ends and hands its place on.
    const holding = client.call("scripted.act", { key: "holding", ms: 100, spinMs: 400 });
    await eventually("the holding call running", async () =>
      runs().some((run) => run.key === "holding") ? true : undefined,
    );
    const late = await client.call("scripted.act", { key: "late", ms: 0 }, { timeoutMs: 200 });
    assert.deepEqual(await holding, { ok: true, output: { key: "holding" } });
    assert.equal(!late.ok && late.error.code, "timeout");
    await sleep(underLoadMs(100));
    assert.deepEqual(
      runs().map((run) => run.key),
      ["holding"],
      "the call whose limit was spent in the line never ran",
    );
  } finally {
    await client.close();
    await runtime.close();
  }
});
