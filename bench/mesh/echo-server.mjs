#!/usr/bin/env node
// The bench's stdio child: an MCP SDK server with one echo tool, launched by the mesh and by the raw SDK alike.
import { McpServer } from "@modelcontextprotocol/server";
import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";
import { z } from "zod";

const server = new McpServer({ name: "bench-echo", version: "1.0.0" });
server.registerTool(
  "echo",
  { description: "Echoes its text", inputSchema: z.object({ text: z.string() }) },
  async ({ text }) => ({
    content: [{ type: "text", text }],
  }),
);
await server.connect(new StdioServerTransport());
