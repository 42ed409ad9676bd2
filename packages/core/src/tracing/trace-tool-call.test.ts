import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { trace } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { z } from "zod";
import { controlFlowBrand } from "../errors/control-flow.ts";
import { defineTool } from "../tool/define-tool.ts";
import { createToolSet } from "../tool-set/create-tool-set.ts";

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
before(() => trace.setGlobalTracerProvider(provider));
after(() => trace.disable());

const tools = createToolSet([
  defineTool({
    name: "orders.get",
    description: "Reads an order.",
    input: z.object({ id: z.string() }),
    execute: ({ id }) => {
      if (id === "pause") throw Object.assign(new Error("paused"), { [controlFlowBrand]: true });
      if (id === "missing") throw new Error("no such order");
      return { id };
    },
  }),
]);

it("records one execute_tool span per call with the GenAI attributes", async () => {
  exporter.reset();
  await tools.call("orders.get", { id: "o1" }, { callId: "call-1" });
  const [span] = exporter.getFinishedSpans();
  assert.equal(span?.name, "execute_tool orders.get");
  assert.deepEqual(span?.attributes, {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "orders.get",
    "gen_ai.tool.description": "Reads an order.",
    "gen_ai.tool.call.id": "call-1",
    "gen_ai.tool.type": "function",
  });
  assert.equal(span?.status.code, 0);
});

it("marks a failed call with error.type and an error status", async () => {
  exporter.reset();
  await tools.call("orders.get", { id: "missing" });
  // @ts-expect-error: a number where the tool takes a string, to get invalid input
  await tools.call("orders.get", { id: 42 });
  const [failed, invalid] = exporter.getFinishedSpans();
  assert.equal(failed?.attributes["error.type"], "tool_failed");
  assert.equal(failed?.status.code, 2);
  assert.equal(invalid?.attributes["error.type"], "invalid_input");
});

it("never reports an interrupt (control flow) as an error", async () => {
  exporter.reset();
  await assert.rejects(tools.call("orders.get", { id: "pause" }));
  const [span] = exporter.getFinishedSpans();
  assert.equal(span?.attributes["error.type"], undefined);
  assert.notEqual(span?.status.code, 2);
});
