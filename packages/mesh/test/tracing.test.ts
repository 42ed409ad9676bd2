/**
 * Tracing across the bus: the client's `send` span, the runtime's `process` span and core's
 * `execute_tool` span form one trace (W3C trace context in the NATS headers).
 */
import assert from "node:assert/strict";
import { AsyncLocalStorage } from "node:async_hooks";
import { after, before, it } from "node:test";
import {
  type Context,
  type ContextManager,
  context,
  propagation,
  ROOT_CONTEXT,
  trace,
} from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { type NatsServerHandle, startNatsServer } from "@tackle/test-support";
import { createMeshClient, startNodeRuntime } from "../src/index.ts";
import { fixture, meshConfig } from "./helpers.ts";

/** The smallest async-aware context manager (the SDK's lives in a package this workspace does not ship). */
class StorageContextManager implements ContextManager {
  readonly #storage = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.#storage.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    active: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.#storage.run(active, () => fn.call(thisArg, ...args));
  }
  bind<T>(_active: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.#storage.disable();
    return this;
  }
}

const exporter = new InMemorySpanExporter();
let nats: NatsServerHandle;
before(async () => {
  context.setGlobalContextManager(new StorageContextManager());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
  );
  nats = await startNatsServer();
});
after(async () => {
  await nats?.close();
});

it("joins the caller's send span, the runtime's process span and the tool's span in one trace", async () => {
  const runtime = await startNodeRuntime({
    config: meshConfig("node-t", nats.url, [{ module: "alpha", path: fixture("alpha.ts") }]),
  });
  const client = await createMeshClient({ servers: nats.url });
  try {
    exporter.reset();
    assert.deepEqual(await client.call("alpha.echo", { text: "traced" }), {
      ok: true,
      output: { text: "traced" },
    });
    const failed = await client.call("alpha.fail", {});
    assert.equal(failed.ok, false);

    const spans = exporter.getFinishedSpans();
    const named = (name: string) => spans.filter((span) => span.name === name);
    const [send] = named("send tackle.tools.alpha.echo");
    const [process] = named("process tackle.tools.alpha.echo");
    const [tool] = named("execute_tool echo");
    assert.ok(send && process && tool, `spans: ${spans.map((span) => span.name).join(", ")}`);
    assert.equal(process.spanContext().traceId, send.spanContext().traceId);
    assert.equal(process.parentSpanContext?.spanId, send.spanContext().spanId);
    assert.equal(tool.parentSpanContext?.spanId, process.spanContext().spanId);
    assert.equal(send.attributes["messaging.system"], "nats");
    assert.equal(send.attributes["messaging.destination.name"], "tackle.tools.alpha.echo");
    assert.equal(process.attributes["messaging.operation.type"], "process");

    const [failedSend] = named("send tackle.tools.alpha.fail");
    const [failedProcess] = named("process tackle.tools.alpha.fail");
    assert.equal(failedSend?.attributes["error.type"], "tool_failed");
    assert.equal(failedProcess?.attributes["error.type"], "tool_failed");
  } finally {
    await client.close();
    await runtime.close();
  }
});
