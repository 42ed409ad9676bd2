import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/client";
import { InMemoryTransport, McpServer } from "@modelcontextprotocol/server";
import { z } from "zod";
import { defineTool } from "../tool/define-tool.ts";
import { createToolSet } from "../tool-set/create-tool-set.ts";
import { createMcpServer } from "./create-mcp-server.ts";
import { createMcpHttpHandler, serveMcpStdio } from "./serve-mcp.ts";
import { toolSetFromMcp } from "./tool-set-from-mcp.ts";

describe("MCP edges", () => {
  it("refuses, naming it, a tool whose input is not an object", () => {
    const toolset = createToolSet([
      defineTool({ name: "shout", description: "", input: z.string(), execute: (text) => text }),
    ]);
    for (const serve of [
      () => createMcpServer(toolset),
      () => serveMcpStdio(toolset),
      () => createMcpHttpHandler(toolset),
    ]) {
      assert.throws(serve, (error: unknown) => {
        assert.equal((error as { code?: string }).code, "invalid_tool_definition");
        assert.match(
          (error as Error).message,
          /"shout" \(.*mcp-edges\.test\.ts:\d+\) cannot be served over MCP/,
        );
        return true;
      });
    }
  });

  it("reads a plain MCP server's prose and isError text", async () => {
    const server = new McpServer({ name: "plain", version: "1.0.0" });
    server.registerTool("greet", { description: "Greets." }, async () => ({
      content: [{ type: "text", text: "hello there" }],
    }));
    server.registerTool("broken", { description: "Fails." }, async () => ({
      isError: true,
      content: [{ type: "text", text: "disk full" }],
    }));
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const client = new Client({ name: "test", version: "0.1.0" });
    await client.connect(clientSide);
    try {
      const toolset = await toolSetFromMcp(client);
      assert.equal(toolset.get("greet")?.source, "mcp:plain/greet");
      assert.deepEqual(await toolset.call("greet", {}), { ok: true, output: "hello there" });
      const broken = await toolset.call("broken", {});
      assert.ok(!broken.ok);
      assert.equal(broken.error.code, "tool_failed");
      assert.match(broken.error.message, /MCP tool "broken" failed: disk full/);
    } finally {
      await client.close();
      await server.close();
    }
  });
});
