/**
 * A tool that declares an output schema, answering past the budget of the console and `tackle mcp`
 * (ADR 0272), with the real MCP SDK client: over the console's HTTP (a 2025 session, a session-less
 * 2026-07-28 client), `tackle mcp` over stdio, and `tackle mcp --console`. The answer is an
 * `answer_too_large` error the client accepts — its structured content left out, its text the first
 * part, all of it within the budget — and the parts read from the error's cursor join into the exact
 * JSON. An answer within the budget keeps its structured content, unchanged.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { type CallToolResult, Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { createToolSet, silentLogger } from "@tackle/core";
import { underLoadMs } from "@tackle/test-support";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { type RunningConsole, startConsole } from "../src/console/start-console.ts";
import { createEmbeddedToolSource } from "../src/tool-source/create-embedded-tool-source.ts";
import { largeResultTools, rowsOf } from "./fixtures/large-results-bundle.ts";
import { cleanEnv, mainScript } from "./tackle-process.ts";

const token = "test-token-output-schema-budget-0123";
const pageTool = "tackle.result_page";
const bundle = fileURLToPath(new URL("./fixtures/large-results-bundle.ts", import.meta.url));

const call = async (client: Client, name: string, args: Record<string, unknown> = {}) =>
  (await client.callTool({ name, arguments: args }, { timeout: underLoadMs(120_000) })) as CallToolResult;
/** What a model may read of a result: its content and its structured content, both. */
const tokensRead = (result: CallToolResult) =>
  result.content.reduce((sum, block) => sum + (block.type === "text" ? countTokens(block.text) : 1_000), 0) +
  (result.structuredContent === undefined ? 0 : countTokens(JSON.stringify(result.structuredContent)));
/** A part's text, its summary (the last block) left out. */
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
  readonly data: { tool: string; budget: number; tokens: number; estimated?: true; cursor?: string };
}

/**
 * `count` rows past the budget as the client receives them, checked: an error the client accepted,
 * coded `answer_too_large`, without the structure, within the budget; every part from the error's
 * cursor (the first part again) within the budget; the parts joined are the rows' exact JSON.
 */
async function assertRowsInParts(client: Client, budget: number, count: number): Promise<void> {
  const answer = await call(client, "large.rows", { count });
  const json = JSON.stringify(rowsOf(count));
  assert.equal(answer.isError, true, "an answer past the budget is marked an error");
  assert.ok(JSON.stringify(answer).length < json.length / 10, "the whole structure did not go out");
  const error = (answer.structuredContent as { error: TooLarge }).error;
  assert.equal(error.code, "answer_too_large");
  assert.equal(error.data.tool, "large.rows");
  assert.equal(error.data.budget, budget);
  // Past 100,000 characters the total is estimated from a sample (ADR 0555).
  const exact = countTokens(json);
  assert.ok(
    Math.abs(error.data.tokens - exact) / exact < 0.02,
    `${error.data.tokens} said, ${exact} counted`,
  );
  assert.equal(error.data.estimated, json.length > 100_000 ? true : undefined);
  assert.ok(tokensRead(answer) <= budget, `the answer reads ${tokensRead(answer)} tokens`);
  const summary = answer.content.at(-1);
  assert.match(summary?.type === "text" ? summary.text : "", /marked an error/);
  const parts: CallToolResult[] = [];
  for (let cursor = error.data.cursor; cursor !== undefined; cursor = nextCursor(parts.at(-1)!)) {
    const part = await call(client, pageTool, { cursor });
    assert.notEqual(part.isError, true, JSON.stringify(part.content).slice(0, 300));
    assert.ok(tokensRead(part) <= budget, `a part of ${tokensRead(part)} tokens, over ${budget}`);
    parts.push(part);
  }
  assert.ok(parts.length >= countTokens(json) / budget, `${parts.length} parts`);
  assert.equal(partText(parts[0]!), partText(answer), "the error's cursor reads the first part again");
  assert.equal(parts.map(partText).join(""), json, "the parts join into the exact JSON");
  assert.deepEqual(JSON.parse(parts.map(partText).join("")), rowsOf(count));
}

/** A few rows, within the budget: the structured content whole, not an error. */
async function assertSmallRowsWhole(client: Client): Promise<void> {
  const small = await call(client, "large.rows", { count: 3 });
  assert.equal(small.isError, undefined);
  assert.deepEqual(small.structuredContent, rowsOf(3));
}

function stdioClient(args: readonly string[], env: Record<string, string>): Promise<Client> {
  const client = new Client(
    { name: "output-schema-budget", version: "1.0.0" },
    { versionNegotiation: { mode: "legacy" } },
  );
  return client
    .connect(
      new StdioClientTransport({
        command: process.execPath,
        args: ["--conditions=@tackle/source", mainScript, "mcp", ...args],
        env: cleanEnv({ TACKLE_LOG_LEVEL: "silent", ...env }) as Record<string, string>,
        stderr: "pipe",
      }),
    )
    .then(() => client);
}

describe("the console over HTTP", () => {
  const budget = 8_000;
  let running: RunningConsole;
  before(async () => {
    const source = createEmbeddedToolSource([
      { module: "large", toolset: createToolSet(largeResultTools()), errors: [], close: () => {} },
    ]);
    running = await startConsole({
      source,
      listen: { host: "127.0.0.1", port: 0 },
      token,
      logger: silentLogger,
    });
  });
  after(() => running.close());

  for (const [label, mode, count] of [
    ["a 2025 session: 50,000 rows", "legacy", 50_000],
    ["a session-less 2026-07-28 client: 10,000 rows", { pin: "2026-07-28" }, 10_000],
  ] as const) {
    test(`${label} come as answer_too_large, read in parts into the exact JSON`, async () => {
      const client = new Client(
        { name: "output-schema-budget", version: "1.0.0" },
        { versionNegotiation: { mode } },
      );
      await client.connect(
        new StreamableHTTPClientTransport(new URL(running.url), {
          requestInit: { headers: { authorization: `Bearer ${token}` } },
        }),
      );
      try {
        const { tools } = await client.listTools();
        assert.ok(tools.find((tool) => tool.name === "large.rows")?.outputSchema, "the schema is advertised");
        await assertRowsInParts(client, budget, count);
        await assertSmallRowsWhole(client);
      } finally {
        await client.close();
      }
    });
  }

  test("tackle mcp --console budgets the console's whole answer the same way", async () => {
    const client = await stdioClient(["--console", running.url, "--result-budget", "2000"], {
      TACKLE_CONSOLE_TOKEN: token,
    });
    try {
      await assertRowsInParts(client, 2_000, 2_000);
      await assertSmallRowsWhole(client);
    } finally {
      await client.close();
    }
  });
});

test("tackle mcp over stdio: 50,000 rows as answer_too_large, read in parts into the exact JSON", async () => {
  const client = await stdioClient(["--result-budget", "2000"], { MESH_TOOL_MODULES: `large=${bundle}` });
  try {
    await assertRowsInParts(client, 2_000, 50_000);
    await assertSmallRowsWhole(client);
  } finally {
    await client.close();
  }
});
