/**
 * The NATS server restarted under load (its own server: this suite stops and starts it): calls caught
 * in flight wait for it and come back with their results (or say they did not run), none hangs, and
 * the runtime serves again after.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import { createMeshClient, issueMembership, startNodeRuntime } from "../src/index.ts";
import { eventually, fixture, meshConfig, recordingLogger } from "./helpers.ts";

let nats: NatsServerHandle;
before(async () => {
  nats = await startNatsServer();
});
after(async () => {
  await nats?.close();
});

it("reconnects after a broker restart under load; calls in flight outlive it and none hangs", async () => {
  const logger = recordingLogger();
  const runtime = await startNodeRuntime({
    logger,
    config: meshConfig("node-r", nats.url, [
      { module: "alpha", path: fixture("alpha.ts") },
      { module: "py", path: fixture("python-bundle.py") },
    ]),
  });
  const client = await createMeshClient({ servers: nats.url, timeoutMs: 60_000 });
  let stop = false;
  try {
    // A node serves exactly what it is issued: alpha too.
    await issueMembership(client.connection, { node: "node-r", module: "alpha" });
    await issueMembership(client.connection, {
      node: "node-r",
      module: "py",
      prefix: "r.py",
      seats: ["notes"],
    });
    await eventually("the issued prefix", async () => {
      const result = await client.call("py.upper", { text: "x" });
      return result.ok ? result : undefined;
    });
    await eventually("alpha on its membership", async () => {
      const result = await client.call("alpha.add", { a: 1, b: 1 });
      return result.ok ? result : undefined;
    });

    // Load: slow calls in flight on both kinds of bundle (the Python child runs its calls one by
    // one), plus a stream of quick ones. They outlast the outage: the node keeps running them.
    const inFlight = [
      ...Array.from({ length: 20 }, () => client.call("alpha.slow", { ms: 4000 })),
      ...Array.from({ length: 2 }, () => client.call("py.sleep", { seconds: 2 })),
    ].map((call) => call.then((result) => ({ result, at: Date.now() })));
    const quick = (async () => {
      const outcomes: string[] = [];
      while (!stop) {
        const result = await client.call("alpha.add", { a: 1, b: 1 });
        outcomes.push(result.ok ? "ok" : result.error.code);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      return outcomes;
    })();
    await new Promise((resolve) => setTimeout(resolve, 200));

    await nats.stop();
    const settledEarly: string[] = [];
    for (const call of inFlight)
      void call.then(({ result }) => settledEarly.push(result.ok ? "ok" : result.error.code));
    await new Promise((resolve) => setTimeout(resolve, 500));
    // A call caught in flight waits for the broker (ADR 0208); only one still looking up its module
    // when the broker went (a loaded machine is slow to send all 22) is refused at once, never sent.
    assert.ok(
      settledEarly.every((code) => code === "unavailable" || code === "ok"),
      `settled during the outage: ${settledEarly.join(", ")}`,
    );
    await nats.restart();
    const restartedAt = Date.now();
    const settled = await Promise.all(inFlight);
    const waited = Math.max(...settled.map((call) => call.at)) - restartedAt;
    // The tools' own few seconds, far below the calls' 60 s deadline.
    assert.ok(waited < 15_000, `calls in flight settled ${waited} ms after the restart`);
    for (const { result } of settled) {
      if (result.ok) continue;
      // Not sent, or lost inside the stopping broker: both say the call did not run.
      assert.ok(["unavailable", "not_delivered"].includes(result.error.code), result.error.message);
      assert.equal(result.error.retryable, true);
    }
    // Every call is ok or says it did not run (above); those on the wire when the broker went come back
    // with their results, and a loaded machine sends at least one before it goes.
    assert.ok(
      settled.some(({ result }) => result.ok),
      `calls in flight come back with their result: ${settled.map(({ result }) => (result.ok ? "ok" : result.error.code)).join(", ")}`,
    );

    // The runtime and the client reconnect by themselves; the same module answers on the same subjects.
    await eventually(
      "a call after the restart",
      async () => {
        const result = await client.call("alpha.echo", { text: "after" });
        return result.ok ? result : undefined;
      },
      15_000,
    );
    stop = true;
    const outcomes = await quick;
    assert.ok(outcomes.includes("ok"));
    assert.deepEqual(await client.call("py.upper", { text: "issued prefix kept" }), {
      ok: true,
      output: { text: "ISSUED PREFIX KEPT" },
    });
    assert.deepEqual(await client.callSeat("notes", "write", { text: "seat kept" }), {
      ok: true,
      output: { written: "seat kept", by: "python" },
    });
    assert.ok(logger.lines.some((line) => line.message.includes("lost the NATS connection")));
    assert.ok(logger.lines.some((line) => line.message.includes("reconnected to NATS")));

    // The membership watch survived the restart: a new issuance still moves the module.
    await issueMembership(client.connection, { node: "node-r", module: "py", prefix: "r.py2" });
    await eventually("re-served after the restart", async () =>
      runtime.modules().find((module) => module.module === "py")?.prefix === "r.py2" ? true : undefined,
    );
    assert.deepEqual(await client.call("py.upper", { text: "moved" }), {
      ok: true,
      output: { text: "MOVED" },
    });
  } finally {
    stop = true;
    await client.close();
    await runtime.close();
  }
});
