/**
 * A tool that declares an output schema, answering past the budget of core's MCP servers (ADR 0542),
 * with the real MCP SDK client: over stdio and stateless Streamable HTTP at both revisions, the answer
 * is an `answer_too_large` error the client accepts — its structured content left out, its text the
 * first part, all of it within the budget — and every part reads back the whole JSON. Random sizes
 * around the budget: what the model reads always fits, and an answer within the budget is unchanged.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type CallToolResult, Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { z } from "zod";
import { createToolSet, defineTool, ToolError, type ToolSet } from "../src/index.ts";
import {
  createMcpServer,
  createResultPages,
  type McpHttpServer,
  serveMcpHttp,
  serveMcpStdio,
  toolSetFromMcp,
} from "../src/mcp/index.ts";

const pageTool = "tackle.result_page";
const words = [
  "row",
  "naïve café",
  "数据行",
  "🦊 fox",
  'quote " and \\ slash',
  "a much longer name of a row",
];

/** `rows` rows of `{ id, name, tags }`, the name made of `word`. */
const rowsOf = (count: number, word: string) =>
  Array.from({ length: count }, (_, id) => ({ id, name: `${word} ${id}`, tags: ["x", "y"] }));

function listTools(): ToolSet {
  return createToolSet([
    defineTool({
      name: "rows.list",
      description: "Rows, as structured output.",
      input: z.object({ count: z.number().int().min(0), word: z.string() }),
      output: z.object({
        rows: z.array(z.object({ id: z.number(), name: z.string(), tags: z.array(z.string()) })),
      }),
      execute: ({ count, word }) => ({ rows: rowsOf(count, word) }),
    }),
  ]);
}

const call = async (client: Client, name: string, args: Record<string, unknown> = {}) =>
  (await client.callTool({ name, arguments: args })) as CallToolResult;
const textTokens = (result: CallToolResult) =>
  result.content.reduce((sum, block) => sum + (block.type === "text" ? countTokens(block.text) : 1_000), 0);
/** What a model may read of a result: its content and its structured content, both. */
const tokensRead = (result: CallToolResult) =>
  textTokens(result) +
  (result.structuredContent === undefined ? 0 : countTokens(JSON.stringify(result.structuredContent)));
const partText = (result: CallToolResult) =>
  result.content
    .slice(0, -1)
    .map((block) => (block.type === "text" ? block.text : ""))
    .join("");
const nextCursor = (result: CallToolResult) =>
  (result._meta?.["tackle/resultPage"] as { cursor?: string } | undefined)?.cursor;

interface TooLarge {
  readonly code: string;
  readonly message: string;
  readonly data: { tool: string; budget: number; tokens: number; cursor?: string };
}

/**
 * The answer past the budget as a client receives it, checked: an error the client accepted, coded
 * `answer_too_large`, no whole structure, within the budget with its error; every part from the error's
 * cursor (the first again) within the budget, the first the same as the answer's text; the parts joined.
 */
async function readTooLarge(client: Client, answer: CallToolResult, budget: number): Promise<string> {
  assert.equal(answer.isError, true);
  const error = (answer.structuredContent as { error: TooLarge }).error;
  assert.equal(error.code, "answer_too_large");
  assert.equal(error.data.budget, budget);
  assert.ok(tokensRead(answer) <= budget, `the answer reads ${tokensRead(answer)} tokens`);
  const summary = answer.content.at(-1);
  assert.match(summary?.type === "text" ? summary.text : "", /marked an error/);
  const parts: CallToolResult[] = [];
  for (let cursor = error.data.cursor; cursor !== undefined; cursor = nextCursor(parts.at(-1)!)) {
    const part = await call(client, pageTool, { cursor });
    assert.notEqual(part.isError, true, JSON.stringify(part.content).slice(0, 300));
    assert.ok(tokensRead(part) <= budget, `a part of ${tokensRead(part)} tokens`);
    parts.push(part);
  }
  assert.ok(parts.length >= 2, "a cut answer has more than one part");
  assert.equal(partText(parts[0]!), partText(answer), "the error's cursor reads the first part again");
  assert.equal(nextCursor(parts[0]!), nextCursor(answer));
  return parts.map(partText).join("");
}

async function connected(
  tools: ToolSet,
  budget: number,
): Promise<{ client: Client; close(): Promise<void> }> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const served = serveMcpStdio(tools, { transport: serverSide, resultPages: createResultPages({ budget }) });
  const client = new Client({ name: "structure-budget-test", version: "0.1.0" });
  await client.connect(clientSide);
  const close = async () => {
    await client.close();
    await served.close();
  };
  return { client, close };
}

describe("a declared structure past the budget of core's MCP servers", () => {
  const budget = 2_000;
  const rows = rowsOf(50_000, "row");
  let http: McpHttpServer;
  before(async () => {
    http = await serveMcpHttp(listTools(), { resultPages: createResultPages({ budget }) });
  });
  after(() => http.close());

  /** Every part is read of 50,000 rows over stdio, of 10,000 over HTTP (the same code, a shorter run). */
  async function assertManyRows(client: Client, count: number): Promise<void> {
    const answer = await call(client, "rows.list", { count, word: "row" });
    assert.ok(JSON.stringify(answer).length < 20_000, "the whole object did not go out");
    const whole = await readTooLarge(client, answer, budget);
    assert.deepEqual(JSON.parse(whole), { rows: rows.slice(0, count) });
    const small = await call(client, "rows.list", { count: 3, word: "row" });
    assert.deepEqual(small.structuredContent, { rows: rowsOf(3, "row") });
    assert.equal(small.isError, undefined);
  }

  it("over stdio: an answer_too_large error the SDK client accepts, read in parts", async () => {
    const { client, close } = await connected(listTools(), budget);
    try {
      await assertManyRows(client, 50_000);
    } finally {
      await close();
    }
  });

  for (const mode of ["legacy", { pin: "2026-07-28" }] as const) {
    it(`over HTTP, stateless (${mode === "legacy" ? "2025-11-25" : "2026-07-28"})`, async () => {
      const client = new Client(
        { name: "structure-budget-test", version: "0.1.0" },
        { versionNegotiation: { mode } },
      );
      await client.connect(new StreamableHTTPClientTransport(http.url));
      try {
        await assertManyRows(client, 10_000);
      } finally {
        await client.close();
      }
    });
  }

  it("resultPages: false answers the whole structure", async () => {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await createMcpServer(listTools(), { resultPages: false }).connect(serverSide);
    const client = new Client({ name: "structure-budget-test", version: "0.1.0" });
    await client.connect(clientSide);
    const answer = await call(client, "rows.list", { count: 5_000, word: "row" });
    assert.deepEqual(answer.structuredContent, { rows: rowsOf(5_000, "row") });
    assert.equal(answer.isError, undefined);
    await client.close();
  });

  it("through toolSetFromMcp: a coded error whose cursor reads every part", async () => {
    const { client, close } = await connected(listTools(), budget);
    try {
      const remote = await toolSetFromMcp(client);
      const result = await remote.call("rows.list", { count: 2_000, word: "row" });
      assert.equal(result.ok, false);
      const error = (result as { error: ToolError }).error;
      assert.ok(ToolError.isInstance(error));
      assert.equal(error.code, "answer_too_large");
      const cursor = (error.data as { cursor: string }).cursor;
      assert.match(
        error.message,
        new RegExp(`${pageTool.replace(".", "\\.")}, from \\{"cursor":"${cursor}"\\}`),
      );
      const first = await remote.call(pageTool, { cursor });
      assert.equal(first.ok, true);
    } finally {
      await close();
    }
  });
});

describe("random sizes around the budget", () => {
  it("what the model reads fits, every part reads, the parts join into the whole JSON", async () => {
    let seed = 0x5eed;
    const random = () => {
      seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
      return seed / 2 ** 32;
    };
    let cut = 0;
    let whole = 0;
    for (const budget of [1_500, 2_300]) {
      const { client, close } = await connected(listTools(), budget);
      try {
        for (let run = 0; run < 60; run++) {
          const word = words[Math.floor(random() * words.length)]!;
          // Half the runs within 5% of the budget, the rest from a fifth of it to four times it.
          const perRow = countTokens(JSON.stringify(rowsOf(100, word))) / 100;
          const scale = run % 2 === 0 ? 0.95 + random() * 0.1 : 0.2 + random() * 3.8;
          const count = Math.round((budget / perRow) * scale);
          const expected = { rows: rowsOf(count, word) };
          const json = JSON.stringify(expected);
          const answer = await call(client, "rows.list", { count, word });
          if (countTokens(json) <= budget) {
            whole++;
            assert.equal(answer.isError, undefined, `${count} × ${word}`);
            assert.deepEqual(answer.structuredContent, expected);
            assert.deepEqual(answer.content, [{ type: "text", text: json }]);
            continue;
          }
          cut++;
          assert.equal(await readTooLarge(client, answer, budget), json, `${count} × ${word}`);
        }
      } finally {
        await close();
      }
    }
    assert.ok(cut > 20 && whole > 10, `${cut} cut, ${whole} whole: the sizes straddle the budget`);
  });
});
