import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { z } from "zod";
import { defineTool } from "../tool/define-tool.ts";
import { createToolSet } from "../tool-set/create-tool-set.ts";
import { createMcpServer } from "./create-mcp-server.ts";
import { serveMcpHttp } from "./serve-mcp.ts";

const inherited = ["__proto__", "constructor", "toString", "hasOwnProperty", "valueOf", "isPrototypeOf"];

function named(name: string) {
  return defineTool({
    name,
    description: `The tool ${name}.`,
    input: z.object({}),
    execute: () => ({ ran: name }),
  });
}

/** What a client reads back for a call of `name`: the tool's output, or the SDK's protocol error. */
async function answer(client: Client, name: string): Promise<unknown> {
  try {
    const result = await client.callTool({ name, arguments: {} });
    return result.structuredContent;
  } catch (error) {
    return (error as Error).message;
  }
}

describe("MCP server: tools named like Object.prototype's properties (ADR 0546)", () => {
  it("lists and runs tools named __proto__ and constructor over HTTP; an unknown inherited name is not found", async () => {
    const http = await serveMcpHttp(createToolSet([named("__proto__"), named("constructor"), named("echo")]));
    const client = new Client({ name: "test", version: "0.1.0" });
    try {
      await client.connect(new StreamableHTTPClientTransport(http.url));
      const listed = (await client.listTools()).tools.map((tool) => tool.name);
      assert.deepEqual(listed, ["__proto__", "constructor", "echo", "tackle.result_page"]);
      assert.deepEqual(await answer(client, "__proto__"), { ran: "__proto__" });
      assert.deepEqual(await answer(client, "constructor"), { ran: "constructor" });
      for (const name of ["toString", "hasOwnProperty", "valueOf"]) {
        assert.match(String(await answer(client, name)), new RegExp(`Tool ${name} not found`));
      }
    } finally {
      await client.close();
      await http.close();
    }
  });

  it("serves exactly the set's tools, for random sets of inherited and ordinary names", async () => {
    let seed = 0x51ed;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pool = [...inherited, "orders.get", "a-b", "__defineGetter__", "propertyIsEnumerable"];
    for (let round = 0; round < 60; round += 1) {
      const names = pool.filter(() => random() < 0.5);
      const server = createMcpServer(createToolSet(names.map(named)));
      const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
      await server.connect(serverSide);
      const client = new Client({ name: "test", version: "0.1.0" });
      await client.connect(clientSide);
      try {
        const listed = (await client.listTools()).tools.map((tool) => tool.name);
        assert.deepEqual(listed, [...names, "tackle.result_page"]);
        for (const name of pool) {
          const expected = names.includes(name) ? { ran: name } : `Tool ${name} not found`;
          const got = await answer(client, name);
          if (typeof expected === "string") assert.match(String(got), new RegExp(expected));
          else assert.deepEqual(got, expected);
        }
      } finally {
        await client.close();
        await server.close();
      }
    }
  });
});
