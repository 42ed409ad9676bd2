/** What an MCP client sees of a Tackle tool: the schema as written, rich content, progress and log messages. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { z } from "zod";
import { ToolError } from "../errors/tool-error.ts";
import { jsonSchema } from "../schema/schema.ts";
import { defineTool } from "../tool/define-tool.ts";
import { toolContent } from "../tool/tool-content.ts";
import { createToolSet } from "../tool-set/create-tool-set.ts";
import { createMcpServer } from "./create-mcp-server.ts";
import { toCallToolResult } from "./to-call-tool-result.ts";

const pixel =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

const schema2020 = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  $defs: { address: { type: "object", properties: { street: { type: "string" } } } },
  properties: { name: { type: "string" }, address: { $ref: "#/$defs/address" } },
  additionalProperties: false,
};

const toolset = createToolSet([
  defineTool({
    name: "fixture.schema",
    description: "Has a 2020-12 schema.",
    input: jsonSchema(schema2020),
    execute: () => "ok",
  }),
  defineTool({
    name: "fixture.picture",
    description: "Returns an image, audio, a resource link and an embedded resource.",
    input: z.object({}),
    execute: () =>
      toolContent([
        { type: "text", text: "plain words, not JSON" },
        { type: "image", data: pixel, mimeType: "image/png" },
        { type: "audio", data: "UklGRg==", mimeType: "audio/wav" },
        { type: "resource_link", uri: "file:///tmp/report.txt", name: "report" },
        { type: "resource", resource: { uri: "test://doc", mimeType: "text/plain", text: "inside" } },
      ]),
  }),
  defineTool({
    name: "fixture.slow",
    description: "Reports progress and logs.",
    input: z.object({}),
    async execute(_input, context) {
      for (let step = 1; step <= 3; step += 1) {
        context.progress(step, 3, `step ${step}`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      context.logger.info("halfway", { step: 2 });
      context.logger.debug("noise");
      return { done: true };
    },
  }),
]);

async function connect() {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const server = createMcpServer(toolset);
  await server.connect(serverSide);
  const client = new Client({ name: "test", version: "0.1.0" });
  await client.connect(clientSide);
  return {
    client,
    close: async () => {
      await client.close();
      await server.close();
    },
  };
}

describe("MCP fidelity", () => {
  it("keeps $schema and every 2020-12 keyword of an input schema (they were stripped)", async () => {
    const { client, close } = await connect();
    try {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.find((tool) => tool.name === "fixture.schema")?.inputSchema, schema2020);
    } finally {
      await close();
    }
  });

  it("sends content blocks beyond JSON as they are", async () => {
    const { client, close } = await connect();
    try {
      const result = await client.callTool({ name: "fixture.picture", arguments: {} });
      assert.deepEqual(
        result.content?.map((block) => block.type),
        ["text", "image", "audio", "resource_link", "resource"],
      );
      assert.deepEqual(result.content?.[0], { type: "text", text: "plain words, not JSON" });
      assert.deepEqual(result.content?.[1], { type: "image", data: pixel, mimeType: "image/png" });
    } finally {
      await close();
    }
  });

  it("sends progress to a client that gave a token, and log messages at the client's level", async () => {
    const { client, close } = await connect();
    try {
      const logs: unknown[] = [];
      client.setNotificationHandler("notifications/message", (notification) => {
        logs.push(notification.params);
      });
      await client.setLoggingLevel("info");
      const progress: unknown[] = [];
      const result = await client.callTool(
        { name: "fixture.slow", arguments: {} },
        { onprogress: (update) => progress.push(update) },
      );
      assert.deepEqual(result.structuredContent, { done: true });
      assert.deepEqual(progress, [
        { progress: 1, total: 3, message: "step 1" },
        { progress: 2, total: 3, message: "step 2" },
        { progress: 3, total: 3, message: "step 3" },
      ]);
      assert.deepEqual(logs, [
        { level: "info", logger: "fixture.slow", data: { message: "halfway", step: 2 } },
      ]);
    } finally {
      await close();
    }
  });
});

describe("toCallToolResult", () => {
  it("writes an error as `code: message` text with the coded error as structured content", () => {
    const error = new ToolError("disk_full", "The disk is full", { retryable: true, data: { free: 0 } });
    assert.deepEqual(toCallToolResult({ ok: false, error }), {
      isError: true,
      content: [{ type: "text", text: "disk_full: The disk is full" }],
      structuredContent: {
        error: { code: "disk_full", message: "The disk is full", retryable: true, data: { free: 0 } },
      },
    });
  });

  it("writes a value as JSON text (a string stays a string) and an object also as structured content", () => {
    assert.deepEqual(toCallToolResult({ ok: true, output: "42" }), {
      content: [{ type: "text", text: '"42"' }],
    });
    assert.deepEqual(toCallToolResult({ ok: true, output: { sum: 3 } }), {
      content: [{ type: "text", text: '{"sum":3}' }],
      structuredContent: { sum: 3 },
    });
  });

  it("passes content blocks through, also after a JSON round trip", () => {
    const output = JSON.parse(
      JSON.stringify(toolContent([{ type: "text", text: "hi" }], { structuredContent: { a: 1 } })),
    );
    assert.deepEqual(toCallToolResult({ ok: true, output }), {
      content: [{ type: "text", text: "hi" }],
      structuredContent: { a: 1 },
    });
  });
});
