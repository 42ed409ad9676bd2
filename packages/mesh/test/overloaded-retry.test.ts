/**
 * The client sends again a call a node refused `overloaded` (ADR 0215), over a real nats-server: a
 * call refused by a full node runs once room frees within its time limit; one kept out past its limit
 * gets the refusal with `data.attempts`, by its deadline; a call refused by a full node while another
 * node of the module has room reaches that one; no other error is sent again (each tool ran once); and
 * a client flooding a full node sends again only what its retry budget allows (ADR 0216), not six
 * sends a call; and that budget is the module's (ADR 0217): a flood one module refuses leaves the
 * retries of the client's calls to another module.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { ToolCallResult } from "@tackle/core";
import { type NatsServerHandle, startNatsServer, underLoadMs } from "@tackle/test-support";
import { createMeshClient, defaultModulePrefix, type NodeRuntime, startNodeRuntime } from "../src/index.ts";
import { eventually, fixture, meshConfig } from "./helpers.ts";

type Gates = { runs: Map<string, number>; open: Map<string, () => void> };
const gates = (): Gates => (globalThis as { meshGates?: Gates }).meshGates as Gates;
const running = (key: string) => async () => (gates()?.runs.has(key) ? true : undefined);

let nats: NatsServerHandle;
before(async () => {
  nats = await startNatsServer();
});
after(async () => {
  await nats?.close();
});

/** A node serving `gated` that runs one of its calls at once and keeps none waiting. */
const fullAfterOne = (node: string): Promise<NodeRuntime> =>
  startNodeRuntime({
    config: meshConfig(node, nats.url, [{ module: "gated", path: fixture("gated.mjs") }]),
    calls: { concurrent: 1, waiting: 0 },
  });

it("a call refused by a full node runs once room frees within its time limit", async () => {
  const runtime = await fullAfterOne("node-r1");
  const client = await createMeshClient({
    servers: nats.url,
    retryOverloaded: { attempts: 1_000, initialDelayMs: 10, maxDelayMs: 50 },
  });
  try {
    const blocking = client.call("gated.wait", { key: "r1-blocking" });
    await eventually("the first call running", running("r1-blocking"));
    const later = client.call("gated.wait", { key: "r1-later" }, { timeoutMs: underLoadMs(10_000) });
    // A refusal answered as it came would be back in a few ms; this one is being sent again.
    const early = await Promise.race([later, sleep(300).then(() => undefined)]);
    assert.equal(early, undefined, `refused and not sent again: ${JSON.stringify(early)}`);
    assert.equal(gates().runs.has("r1-later"), false, "the node is full: it has not run");
    gates().open.get("r1-blocking")?.();
    assert.deepEqual(await blocking, { ok: true, output: { key: "r1-blocking" } });
    await eventually("the refused call running once room freed", running("r1-later"));
    gates().open.get("r1-later")?.();
    assert.deepEqual(await later, { ok: true, output: { key: "r1-later" } });
    assert.equal(gates().runs.get("r1-later"), 1, "it ran once");
  } finally {
    await client.close();
    await runtime.close();
  }
});

it("a call kept out past its time limit gets the refusal with its attempts, by its deadline", async () => {
  const runtime = await fullAfterOne("node-r2");
  const eager = await createMeshClient({
    servers: nats.url,
    retryOverloaded: { attempts: 100_000, initialDelayMs: 5, maxDelayMs: 20 },
  });
  const plain = await createMeshClient({ servers: nats.url });
  try {
    const blocking = plain.call("gated.wait", { key: "r2-blocking" });
    await eventually("the first call running", running("r2-blocking"));

    // Sent again until no wait is left before its deadline: the last refusal, with how many were sent.
    let started = performance.now();
    const refused = await eager.call("gated.wait", { key: "r2-deadline" }, { timeoutMs: 400 });
    let took = performance.now() - started;
    assert.ok(!refused.ok, "refused");
    assert.equal(refused.error.code, "overloaded");
    assert.equal(refused.error.retryable, true);
    const data = refused.error.data as {
      tool: string;
      concurrent: number;
      waiting: number;
      attempts: number;
    };
    assert.deepEqual(
      { ...data, attempts: 0 },
      { tool: "gated.wait", concurrent: 1, waiting: 0, attempts: 0 },
    );
    assert.ok(data.attempts > 1 && data.attempts < 100_000, `${data.attempts} attempts`);
    assert.match(refused.error.message, new RegExp(`refused ${data.attempts} times`));
    // The last send leaves before the deadline and is refused at once: its answer is one round trip on.
    assert.ok(took > 350, `stopped after ${took} ms, before its limit was near`);
    assert.ok(took < 400 + underLoadMs(100), `answered ${took - 400} ms past its limit`);

    // With the default policy: six sends, waits of 5–10, 10–20, 20–40, 40–80, 80–160 ms between them.
    started = performance.now();
    const spent = await plain.call("gated.wait", { key: "r2-spent" }, { timeoutMs: underLoadMs(20_000) });
    took = performance.now() - started;
    assert.ok(!spent.ok && spent.error.code === "overloaded", JSON.stringify(spent));
    assert.equal((spent.error.data as { attempts: number }).attempts, 6);
    assert.match(spent.error.message, /refused 6 times; the client's attempts are spent/);
    // At least 155 ms of waits (less a timer firing a millisecond early now and then).
    assert.ok(took >= 150 && took < underLoadMs(2_000), `six sends in ${took} ms`);

    gates().open.get("r2-blocking")?.();
    assert.deepEqual(await blocking, { ok: true, output: { key: "r2-blocking" } });
    await sleep(underLoadMs(200));
    assert.equal(
      gates().runs.has("r2-deadline") || gates().runs.has("r2-spent"),
      false,
      "refused calls never ran",
    );
  } finally {
    await eager.close();
    await plain.close();
    await runtime.close();
  }
});

it("a call refused by a full node reaches another node of the module that has room", async () => {
  const full = await fullAfterOne("node-r3-full");
  const client = await createMeshClient({
    servers: nats.url,
    retryOverloaded: { attempts: 40, initialDelayMs: 2, maxDelayMs: 10 },
  });
  const once = await createMeshClient({ servers: nats.url, retryOverloaded: false });
  let roomy: NodeRuntime | undefined;
  try {
    const blocking = client.call("gated.wait", { key: "r3-blocking" });
    await eventually("the full node running its one call", running("r3-blocking"));
    roomy = await startNodeRuntime({
      config: meshConfig("node-r3-roomy", nats.url, [{ module: "gated", path: fixture("gated.mjs") }]),
    });
    await eventually("the second node answering", async () => {
      const probe = await once.call("gated.once", { key: `r3-probe-${performance.now()}` });
      return probe.ok ? true : undefined;
    });
    // Each send goes to a member of the queue group picked at random: about half reach the full node.
    const keys = Array.from({ length: 20 }, (_, index) => `r3-${index}`);
    const results = await Promise.all(keys.map((key) => client.call("gated.once", { key })));
    assert.deepEqual(
      results,
      keys.map((key) => ({ ok: true, output: { key } })),
    );
    for (const key of keys) assert.equal(gates().runs.get(key), 1, `${key} ran once`);
    gates().open.get("r3-blocking")?.();
    assert.deepEqual(await blocking, { ok: true, output: { key: "r3-blocking" } });
  } finally {
    await client.close();
    await once.close();
    await roomy?.close();
    await full.close();
  }
});

it("no other error is sent again: a failed, a retryable, a tool's own overloaded and a timed-out call each ran once", async () => {
  const runtime = await startNodeRuntime({
    config: meshConfig("node-r4", nats.url, [{ module: "gated", path: fixture("gated.mjs") }]),
  });
  // Sends again within a millisecond or two: any wrong retry would show in the counts below.
  const client = await createMeshClient({
    servers: nats.url,
    retryOverloaded: { attempts: 50, initialDelayMs: 1, maxDelayMs: 2 },
  });
  try {
    const cases = [
      { key: "r4-failed", code: "tool_failed" },
      { key: "r4-unavailable", code: "unavailable" },
      { key: "r4-own-overloaded", code: "overloaded" },
    ];
    for (const { key, code } of cases) {
      const result = await client.call("gated.once", { key, code });
      assert.equal(!result.ok && result.error.code, code, key);
      assert.equal(
        !result.ok && (result.error.data as { attempts?: number } | undefined)?.attempts,
        undefined,
      );
    }
    const timedOut = await client.call("gated.wait", { key: "r4-timeout" }, { timeoutMs: 300 });
    assert.equal(!timedOut.ok && timedOut.error.code, "timeout");
    gates().open.get("r4-timeout")?.();
    await sleep(underLoadMs(200));
    for (const key of [...cases.map((entry) => entry.key), "r4-timeout"])
      assert.equal(gates().runs.get(key), 1, `${key} ran once`);
  } finally {
    await client.close();
    await runtime.close();
  }
});

it("a client flooding a full node sends again only what its retry budget allows, not six sends a call", async () => {
  const runtime = await fullAfterOne("node-r5");
  // The default client: a budget of 20% of the calls it sent plus 10 a second, over 10 s.
  const client = await createMeshClient({ servers: nats.url });
  // Every send of `gated.once` the node's subject receives, counted beside the node's queue group.
  const sends = client.connection.subscribe(`${defaultModulePrefix("gated")}.once`);
  let received = 0;
  const counting = (async () => {
    for await (const _ of sends) received += 1;
  })();
  try {
    await client.connection.flush();
    const blocking = client.call("gated.wait", { key: "r5-blocking" });
    await eventually("the node's one place taken", running("r5-blocking"));
    const calls = 200;
    const started = performance.now();
    const results = await Promise.all(
      Array.from({ length: calls }, (_, index) =>
        client.call("gated.once", { key: `r5-${index}` }, { timeoutMs: underLoadMs(20_000) }),
      ),
    );
    const took = performance.now() - started;
    await client.connection.flush();
    await eventually("every send counted", async () => (received >= calls ? true : undefined));
    await sleep(100);
    const budgetSpent = results.filter(
      (result) => !result.ok && (result.error.data as { retryBudgetSpent?: boolean }).retryBudgetSpent,
    );
    for (const result of results) {
      assert.ok(!result.ok && result.error.code === "overloaded", JSON.stringify(result));
      assert.equal(result.error.retryable, true);
    }
    // Without a budget: six sends a call (1,200). With it: the first sends, and retries up to 20% of the
    // calls this client sent (the blocking one too) plus 10 a second over the 10 s window (100), per
    // 9 s the flood lasted (the window is counted in tenths: it always covers at least 9 s).
    const windows = Math.max(1, Math.ceil(took / 9_000));
    const bound = calls + windows * (0.2 * (calls + 1) + 100);
    assert.ok(
      received <= bound,
      `${received} sends for ${calls} calls in ${Math.round(took)} ms (bound ${bound})`,
    );
    assert.ok(budgetSpent.length > 0, "calls stopped on the budget say so");
    for (const result of budgetSpent) {
      assert.ok(!result.ok);
      assert.match(result.error.message, /the client's retry budget for the module is spent/);
      const { attempts } = result.error.data as { attempts: number };
      assert.ok(attempts >= 1 && attempts < 6, `${attempts} attempts`);
    }
    gates().open.get("r5-blocking")?.();
    assert.deepEqual(await blocking, { ok: true, output: { key: "r5-blocking" } });
    for (let index = 0; index < calls; index += 1)
      assert.equal(gates().runs.has(`r5-${index}`), false, "refused calls never ran");
  } finally {
    sends.unsubscribe();
    await counting;
    await client.close();
    await runtime.close();
  }
});

it("a flood one module refuses spends that module's retry budget, not the retries of calls to another", async () => {
  // Both modules on one node, each running one call at once and keeping none waiting.
  const runtime = await startNodeRuntime({
    config: meshConfig("node-r6", nats.url, [
      { module: "gated", path: fixture("gated.mjs") },
      { module: "other", path: fixture("gated.mjs") },
    ]),
    calls: { concurrent: 1, waiting: 0 },
  });
  // The default budget per module (20% of its calls plus 10 a second, over 10 s); many attempts, so
  // that only a budget stops a call's retries.
  const client = await createMeshClient({
    servers: nats.url,
    retryOverloaded: { attempts: 1_000, initialDelayMs: 10, maxDelayMs: 50 },
  });
  try {
    const blockingA = client.call("gated.wait", { key: "r6-a-blocking" });
    const blockingB = client.call("other.wait", { key: "r6-b-blocking" });
    await eventually("gated's one place taken", running("r6-a-blocking"));
    await eventually("other's one place taken", running("r6-b-blocking"));
    // The flood on gated: its budget is spent, its last refusals come back at once.
    const flood = await Promise.all(
      Array.from({ length: 200 }, (_, index) =>
        client.call("gated.once", { key: `r6-a-${index}` }, { timeoutMs: underLoadMs(20_000) }),
      ),
    );
    const spent = (result: ToolCallResult) =>
      !result.ok && (result.error.data as { retryBudgetSpent?: boolean }).retryBudgetSpent === true;
    assert.ok(flood.some(spent), "the flood spent gated's budget");
    const afterFlood = await client.call("gated.once", { key: "r6-a-after" });
    assert.ok(spent(afterFlood), `gated's next refusal comes back at once: ${JSON.stringify(afterFlood)}`);
    assert.equal(!afterFlood.ok && (afterFlood.error.data as { attempts: number }).attempts, 1);

    // A call to other, within the same window: refused, and sent again out of other's own budget.
    const later = client.call("other.wait", { key: "r6-b-later" }, { timeoutMs: underLoadMs(10_000) });
    const early = await Promise.race([later, sleep(300).then(() => undefined)]);
    assert.equal(early, undefined, `refused and not sent again: ${JSON.stringify(early)}`);
    gates().open.get("r6-b-blocking")?.();
    assert.deepEqual(await blockingB, { ok: true, output: { key: "r6-b-blocking" } });
    await eventually("other's refused call running once room freed", running("r6-b-later"));
    gates().open.get("r6-b-later")?.();
    assert.deepEqual(await later, { ok: true, output: { key: "r6-b-later" } });
    assert.equal(gates().runs.get("r6-b-later"), 1, "it ran once");

    gates().open.get("r6-a-blocking")?.();
    assert.deepEqual(await blockingA, { ok: true, output: { key: "r6-a-blocking" } });
  } finally {
    await client.close();
    await runtime.close();
  }
});
