/**
 * `tools/list` advertises a tool's output schema (an object output), and the SDK's client, which
 * refuses an answer that does not match it, reads every answer: one within the budget keeps its
 * structured content; past the budget, structured content that does not fit it is left out and the
 * answer is an `answer_too_large` error (ADR 0272; parts read back: test/output-schema-budget.test.ts).
 * A call that waits for approval may answer its paused state, so such a tool advertises none.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Client } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { createToolSet, defineTool } from "@tackle/core";
import { createResultPages } from "@tackle/core/mcp";
import { z } from "zod";
import { createEmbeddedToolSource } from "../tool-source/create-embedded-tool-source.ts";
import type { ApprovalCalls } from "./approval-calls.ts";
import { createMcpServer } from "./create-mcp-server.ts";

const lines = Array.from({ length: 3_000 }, (_, index) => `line ${index}: the quick brown fox`);
const source = createEmbeddedToolSource([
  {
    module: "weather",
    errors: [],
    close: () => {},
    toolset: createToolSet([
      defineTool({
        name: "forecast",
        description: "The weather",
        input: z.object({ city: z.string() }),
        output: z.object({ city: z.string(), celsius: z.number() }),
        execute: ({ city }) => ({ city, celsius: 21 }),
      }),
      defineTool({
        name: "report",
        description: "A long report",
        input: z.object({}),
        output: z.object({ lines: z.array(z.string()) }),
        execute: () => ({ lines }),
      }),
      defineTool({
        name: "plain",
        description: "No schema",
        input: z.object({}),
        execute: () => ({ ok: 1 }),
      }),
    ]),
  },
]);

async function connect(approvals?: ApprovalCalls): Promise<Client> {
  const client = new Client({ name: "output-schema", version: "1" });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const server = createMcpServer(source, {
    resultPages: createResultPages({ budget: 1_500 }),
    ...(approvals === undefined ? {} : { approvals }),
  });
  await server.connect(serverSide);
  await client.connect(clientSide);
  return client;
}

test("tools/list carries each object output schema; the SDK client checks answers against it", async () => {
  const client = await connect();
  try {
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    assert.deepEqual(byName.get("weather.forecast")?.outputSchema?.required, ["city", "celsius"]);
    assert.equal(byName.get("weather.plain")?.outputSchema, undefined);
    const answer = await client.callTool({ name: "weather.forecast", arguments: { city: "Oslo" } });
    assert.deepEqual(answer.structuredContent, { city: "Oslo", celsius: 21 });
  } finally {
    await client.close();
  }
});

test("structured content past the budget is left out: an answer_too_large error the client accepts", async () => {
  const client = await connect();
  try {
    await client.listTools();
    const answer = await client.callTool({ name: "weather.report", arguments: {} });
    assert.equal(answer.isError, true);
    const error = (answer.structuredContent as { error: { code: string; data: { cursor: string } } }).error;
    assert.equal(error.code, "answer_too_large");
    assert.ok(
      JSON.stringify(answer).length < JSON.stringify({ lines }).length / 2,
      "the structure is left out",
    );
    const first = await client.callTool({
      name: "tackle.result_page",
      arguments: { cursor: error.data.cursor },
    });
    assert.notEqual(first.isError, true);
    assert.deepEqual(first.content.slice(0, -1), (answer.content as unknown[]).slice(0, -1));
  } finally {
    await client.close();
  }
});

test("a tool whose calls wait for approval advertises no output schema", async () => {
  const approvals: ApprovalCalls = {
    needs: (name) => name === "weather.forecast",
    tools: [],
    owns: () => false,
    call: async () => ({ ok: true, output: { status: "awaiting_approval" } }),
    close: async () => {},
  };
  const client = await connect(approvals);
  try {
    const { tools } = await client.listTools();
    const forecast = tools.find((tool) => tool.name === "weather.forecast");
    assert.equal(forecast?.outputSchema, undefined);
    const answer = await client.callTool({ name: "weather.forecast", arguments: { city: "Oslo" } });
    assert.deepEqual(answer.structuredContent, { status: "awaiting_approval" });
  } finally {
    await client.close();
  }
});
