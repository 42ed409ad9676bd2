/**
 * A refused call whose caller aborts before or during the wait for its retry (ADR 0215), over a real
 * nats-server: it ends at once, `aborted`, never after the backoff, and is not sent again. "Before" is
 * the moment between the node's refusal coming back and the wait starting: the caller aborts from the
 * end of the call's `send` span, which a registered OpenTelemetry SDK hears synchronously as the send
 * returns its refusal.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { trace } from "@opentelemetry/api";
import { BasicTracerProvider, type ReadableSpan, type SpanProcessor } from "@opentelemetry/sdk-trace-base";
import { type NatsServerHandle, startNatsServer, underLoadMs } from "@tackle/test-support";
import { createMeshClient, defaultModulePrefix, type NodeRuntime, startNodeRuntime } from "../src/index.ts";
import { eventually, fixture, meshConfig } from "./helpers.ts";

type Gates = { runs: Map<string, number>; open: Map<string, () => void> };
const gates = (): Gates => (globalThis as { meshGates?: Gates }).meshGates as Gates;
const running = (key: string) => async () => (gates()?.runs.has(key) ? true : undefined);

/** Called with each `send` span that ended on a node's `overloaded`, as it ends. */
let onRefusedSend: (() => void) | undefined;
const refusedSends: SpanProcessor = {
  onStart: () => {},
  onEnd: (span: ReadableSpan) => {
    if (span.name.startsWith("send ") && span.attributes["error.type"] === "overloaded") onRefusedSend?.();
  },
  forceFlush: async () => {},
  shutdown: async () => {},
};

let nats: NatsServerHandle;
before(async () => {
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [refusedSends] }));
  nats = await startNatsServer();
});
after(async () => {
  await nats?.close();
});

/** Waits of 10–20 s before each retry: a call that slept one would be seconds late. */
const slowRetries = { attempts: 3, initialDelayMs: 20_000, maxDelayMs: 20_000 };

it("a refused call aborted before or during its retry's wait ends at once, aborted, sent once", async () => {
  const runtime: NodeRuntime = await startNodeRuntime({
    config: meshConfig("node-ra", nats.url, [{ module: "gated", path: fixture("gated.mjs") }]),
    calls: { concurrent: 1, waiting: 0 },
  });
  const client = await createMeshClient({ servers: nats.url, retryOverloaded: slowRetries });
  const sends = client.connection.subscribe(`${defaultModulePrefix("gated")}.once`);
  let received = 0;
  const counting = (async () => {
    for await (const _ of sends) received += 1;
  })();
  try {
    await client.connection.flush();
    const blocking = client.call("gated.wait", { key: "ra-blocking" });
    await eventually("the node's one place taken", running("ra-blocking"));

    // Aborted as the refusal comes back, before the wait starts.
    const early = new AbortController();
    onRefusedSend = () => early.abort(new Error("caller gave up"));
    let started = performance.now();
    const beforeWait = await client.call("gated.once", { key: "ra-before" }, { signal: early.signal });
    let took = performance.now() - started;
    assert.ok(!beforeWait.ok, JSON.stringify(beforeWait));
    assert.equal(beforeWait.error.code, "aborted", beforeWait.error.message);
    assert.ok(took < underLoadMs(2_000), `aborted before the wait, answered after ${Math.round(took)} ms`);

    // Aborted 200 ms into the wait.
    const late = new AbortController();
    onRefusedSend = () => setTimeout(() => late.abort(new Error("caller gave up")), 200);
    started = performance.now();
    const inWait = await client.call("gated.once", { key: "ra-during" }, { signal: late.signal });
    took = performance.now() - started;
    onRefusedSend = undefined;
    assert.ok(!inWait.ok, JSON.stringify(inWait));
    assert.equal(inWait.error.code, "aborted", inWait.error.message);
    assert.ok(
      took >= 150 && took < underLoadMs(2_000),
      `aborted in the wait, answered ${Math.round(took)} ms on`,
    );

    await client.connection.flush();
    await sleep(100);
    assert.equal(received, 2, "each call was sent once, never again after its abort");
    gates().open.get("ra-blocking")?.();
    assert.deepEqual(await blocking, { ok: true, output: { key: "ra-blocking" } });
    assert.equal(gates().runs.has("ra-before") || gates().runs.has("ra-during"), false, "neither ran");
  } finally {
    sends.unsubscribe();
    await counting;
    await client.close();
    await runtime.close();
  }
});
