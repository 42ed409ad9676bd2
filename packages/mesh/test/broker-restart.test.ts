/**
 * The NATS server restarted under load (its own server: this suite stops and starts it): calls caught
 * in flight fail at once with a clear error, none hangs, and the runtime serves again after.
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

it("reconnects after a broker restart under load; calls in flight fail clearly and none hangs", async () => {
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

    // Load: slow calls in flight on both kinds of bundle, plus a stream of quick ones.
    // Far longer than the test: a call that settles at all settled because the broker went away.
    const inFlight = [
      ...Array.from({ length: 20 }, () => client.call("alpha.slow", { ms: 30_000 })),
      ...Array.from({ length: 5 }, () => client.call("py.sleep", { seconds: 30 })),
    ].map((call) => call.then((result) => ({ result, at: Date.now() })));
    const quick = (async () => {
      const outcomes: string[] = [];
      while (!stop) {
        outcomes.push((await client.call("alpha.add", { a: 1, b: 1 })).ok ? "ok" : "failed");
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      return outcomes;
    })();
    await new Promise((resolve) => setTimeout(resolve, 200));

    await nats.stop();
    const stoppedAt = Date.now(); // the server process has exited: every connection is gone
    const settled = await Promise.all(inFlight);
    const waited = Math.max(...settled.map((call) => call.at)) - stoppedAt;
    // Far below the calls' own 30 s deadline; generous because a loaded 2-core CI box is slow to notice.
    assert.ok(
      waited < 10_000,
      `calls in flight settled ${waited} ms after the broker stopped, not at their timeout`,
    );
    for (const { result } of settled) {
      assert.equal(result.ok, false);
      if (result.ok) continue;
      // A call already on the wire is dropped; one still looking up its module when the broker went
      // (a loaded machine is slow to send all 25) is never sent. Both say which, and both are retryable.
      if (result.error.code === "disconnected") {
        assert.match(result.error.message, /dropped while the call was in flight/);
      } else {
        assert.equal(result.error.code, "unavailable", result.error.message);
        assert.match(result.error.message, /was not sent/);
      }
      assert.equal(result.error.retryable, true);
    }

    await nats.restart();
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
