/** What a node announces of its tools: the input schema, and the output schema where a tool declares an object output. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { createToolSet, defineTool } from "@tackle/core";
import { z } from "zod";
import { describeModule } from "./module-info.ts";

test("a tool's object output schema is announced beside its input schema; other outputs announce none", () => {
  const toolset = createToolSet([
    defineTool({
      name: "forecast",
      description: "The weather",
      input: z.object({ city: z.string() }),
      output: z.object({ city: z.string(), celsius: z.number() }),
      execute: ({ city }) => ({ city, celsius: 21 }),
    }),
    defineTool({
      name: "count",
      description: "A number",
      input: z.object({}),
      output: z.number(),
      execute: () => 3,
    }),
    defineTool({ name: "plain", description: "No schema", input: z.object({}), execute: () => ({}) }),
  ]);
  const info = describeModule(
    { module: "weather", toolset, errors: [], digest: "sha256:0", close: async () => {} },
    { node: "n1" },
  );
  const byName = new Map(info.tools.map((tool) => [tool.name, tool]));
  const forecast = byName.get("forecast")?.outputSchema as { type?: string; required?: string[] } | undefined;
  assert.equal(forecast?.type, "object");
  assert.deepEqual(forecast?.required, ["city", "celsius"]);
  assert.equal(byName.get("count")?.outputSchema, undefined);
  assert.equal(byName.get("plain")?.outputSchema, undefined);
  // Through JSON, as the node's answer to `tools` crosses the wire.
  const crossed = JSON.parse(JSON.stringify(info)) as typeof info;
  assert.deepEqual(crossed.tools[0]?.outputSchema, forecast);
});
