/**
 * Core's own MCP servers budget their answers (ADR 0531), with the real MCP SDK client: over stdio
 * (a 2025 connection) and over loopback Streamable HTTP (stateless, both revisions). A long answer
 * comes cut within the budget, counted here with the tokenizer itself, and pages by cursor through
 * every part once, in order; a tool with an output schema answers `answer_too_large` (ADR 0542); a short
 * answer is unchanged; `resultPages: false` answers whole; a cursor is read only by its owner.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type CallToolResult, Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { z } from "zod";
import { createToolSet, defineTool, type ToolSet } from "../src/index.ts";
import {
  createMcpHttpHandler,
  createMcpServer,
  createResultPages,
  type McpHttpServer,
  serveMcpHttp,
  serveMcpStdio,
} from "../src/mcp/index.ts";
import { longText } from "./support/long-answers.ts";

const pageTool = "tackle.result_page";
const budget = 2_000;
const rows = Array.from({ length: 1_500 }, (_, id) => ({ id, name: `row ${id}`, tags: ["a", "b", "c"] }));

function largeTools(): ToolSet {
  return createToolSet([
    defineTool({
      name: "report.text",
      description: "A long plain-text report.",
      input: z.object({}),
      execute: () => longText,
    }),
    defineTool({
      name: "report.rows",
      description: "Many rows, as structured output.",
      input: z.object({}),
      output: z.object({
        rows: z.array(z.object({ id: z.number(), name: z.string(), tags: z.array(z.string()) })),
      }),
      execute: () => ({ rows }),
    }),
    defineTool({
      name: "report.short",
      description: "A short answer.",
      input: z.object({}),
      execute: () => ({ ok: "short" }),
    }),
  ]);
}

const tokensRead = (result: CallToolResult) =>
  result.content.reduce((sum, block) => sum + (block.type === "text" ? countTokens(block.text) : 1_000), 0);
const summaryOf = (result: CallToolResult) => {
  const last = result.content.at(-1);
  assert.equal(last?.type, "text");
  return (last as { text: string }).text;
};
const cursorOf = (result: CallToolResult) => {
  const cursor = (result._meta?.["tackle/resultPage"] as { cursor?: string } | undefined)?.cursor;
  if (cursor !== undefined) assert.ok(summaryOf(result).includes(`${pageTool} {"cursor":"${cursor}"}`));
  return cursor;
};
const call = async (client: Client, name: string, args: Record<string, unknown> = {}) =>
  (await client.callTool({ name, arguments: args })) as CallToolResult;

/** Every part of a cut answer read by cursor, each within the budget; their text joined, summaries out. */
async function readAll(client: Client, first: CallToolResult): Promise<string> {
  const parts = [first];
  for (let cursor = cursorOf(first); cursor !== undefined; cursor = cursorOf(parts.at(-1)!)) {
    const next = await call(client, pageTool, { cursor });
    assert.notEqual(next.isError, true, JSON.stringify(next.content).slice(0, 300));
    parts.push(next);
  }
  for (const part of parts) assert.ok(tokensRead(part) <= budget, `a part of ${tokensRead(part)} tokens`);
  assert.match(summaryOf(parts.at(-1)!), /This is the last part/);
  assert.ok(parts.length > 10, `only ${parts.length} parts`);
  return parts
    .flatMap((part) => part.content.slice(0, -1).map((block) => (block.type === "text" ? block.text : "")))
    .join("");
}

/** What every transport must show. */
async function assertBudgeted(client: Client): Promise<void> {
  const { tools } = await client.listTools();
  assert.ok(tools.some((tool) => tool.name === pageTool && tool.annotations?.readOnlyHint === true));

  const text = await call(client, "report.text");
  assert.match(summaryOf(text), new RegExp(`Answer cut to fit the budget of ${budget} tokens`));
  assert.equal(await readAll(client, text), JSON.stringify(longText));

  // A structure the output schema describes, past the budget, is left out and the answer marked an
  // error the client accepts (ADR 0542); its text is cut and reads back whole.
  const structured = await call(client, "report.rows");
  assert.equal(structured.isError, true);
  assert.equal((structured.structuredContent as { error: { code: string } }).error.code, "answer_too_large");
  assert.deepEqual(JSON.parse(await readAll(client, structured)), { rows });

  const short = await call(client, "report.short");
  assert.deepEqual(short.content, [{ type: "text", text: '{"ok":"short"}' }]);
  assert.equal(short._meta?.["tackle/resultPage"], undefined);
}

describe("core's MCP servers answer within a token budget", () => {
  let http: McpHttpServer;
  before(async () => {
    http = await serveMcpHttp(largeTools(), { resultPages: createResultPages({ budget }) });
  });
  after(() => http.close());

  it("over stdio: cut, paged by cursor, joined back whole", async () => {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const served = serveMcpStdio(largeTools(), {
      transport: serverSide,
      resultPages: createResultPages({ budget }),
    });
    const client = new Client({ name: "budget-test", version: "0.1.0" });
    await client.connect(clientSide);
    try {
      await assertBudgeted(client);
    } finally {
      await client.close();
      await served.close();
    }
  });

  for (const mode of ["legacy", { pin: "2026-07-28" }] as const) {
    it(`over HTTP, stateless (${mode === "legacy" ? "2025-11-25" : "2026-07-28"}): a cursor reads on the next request's server`, async () => {
      const client = new Client({ name: "budget-test", version: "0.1.0" }, { versionNegotiation: { mode } });
      await client.connect(new StreamableHTTPClientTransport(http.url));
      try {
        await assertBudgeted(client);
      } finally {
        await client.close();
      }
    });
  }

  it("by default 8,000 tokens; resultPages: false answers whole", async () => {
    for (const [options, cut] of [
      [{}, true],
      [{ resultPages: false }, false],
    ] as const) {
      const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
      await createMcpServer(largeTools(), options).connect(serverSide);
      const client = new Client({ name: "budget-test", version: "0.1.0" });
      await client.connect(clientSide);
      const answer = await call(client, "report.text");
      const names = (await client.listTools()).tools.map((tool) => tool.name);
      assert.equal(names.includes(pageTool), cut);
      if (cut) {
        assert.match(summaryOf(answer), /budget of 8000 tokens/);
        assert.ok(tokensRead(answer) <= 8_000);
      } else {
        assert.deepEqual(answer.content, [{ type: "text", text: JSON.stringify(longText) }]);
      }
      await client.close();
    }
  });

  it("a cursor is read only by the owner whose answer made it", async () => {
    const pages = createResultPages({ budget });
    const clients: Client[] = [];
    for (const owner of ["first", "second"]) {
      const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
      await createMcpServer(largeTools(), { resultPages: pages, owner }).connect(serverSide);
      const client = new Client({ name: owner, version: "0.1.0" });
      await client.connect(clientSide);
      clients.push(client);
    }
    const [first, second] = clients as [Client, Client];
    const cursor = cursorOf(await call(first, "report.text"))!;
    const refused = await call(second, pageTool, { cursor });
    assert.equal(refused.isError, true);
    assert.equal((refused.structuredContent as { error: { code: string } }).error.code, "not_found");
    assert.notEqual((await call(first, pageTool, { cursor })).isError, true);
    await Promise.all(clients.map((client) => client.close()));
  });

  it("a tool named like the paging tool is refused, naming it", () => {
    const clash = createToolSet([
      defineTool({ name: pageTool, description: "Mine.", input: z.object({}), execute: () => 1 }),
    ]);
    assert.throws(() => createMcpServer(clash), {
      code: "invalid_tool_definition",
      message: /tackle\.result_page/,
    });
    assert.doesNotThrow(() => createMcpServer(clash, { resultPages: false }));
    // Refused when serving starts, not at the first request (the SDK makes a server per request).
    assert.throws(() => createMcpHttpHandler(clash), { code: "invalid_tool_definition" });
    assert.throws(() => serveMcpStdio(clash, { transport: InMemoryTransport.createLinkedPair()[1] }), {
      code: "invalid_tool_definition",
    });
  });
});
