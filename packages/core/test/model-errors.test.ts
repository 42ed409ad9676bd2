/**
 * A failed call as a model reads it (ADR 0533): a tool chooses its error's message and data, so the
 * in-process adapters hand the model the error within the answer budget (counted with the tokenizer
 * itself), the program keeping it whole; and an answer or error data JSON cannot write (a BigInt, a
 * cycle) is a coded error for that call, never an exception that sinks the other calls of the turn.
 * MCP servers answer the same values with a coded error too.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ToolMessage } from "@langchain/core/messages";
import { Client } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import type { Tool as AiSdkTool } from "ai";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { z } from "zod";
import { toAiSdkTools } from "../src/ai-sdk/to-ai-sdk-tools.ts";
import { errorForModel, type ModelError } from "../src/errors/error-for-model.ts";
import { ToolError } from "../src/errors/tool-error.ts";
import { toLangChainTools } from "../src/langchain/to-langchain-tools.ts";
import { createMcpServer } from "../src/mcp/create-mcp-server.ts";
import { runChatToolCalls } from "../src/openai/run-chat-tool-calls.ts";
import { defineTool } from "../src/tool/define-tool.ts";
import { createToolSet } from "../src/tool-set/create-tool-set.ts";

const budget = 2_000;
const longMessage = "The upstream answered: ".concat("status 500, body follows. ".repeat(4_000));
const rows = Array.from({ length: 5_000 }, (_, id) => ({ id, reason: `row ${id} failed its check` }));
const cyclic: Record<string, unknown> = { name: "loop" };
cyclic.self = cyclic;

const tools = createToolSet([
  defineTool({
    name: "db.load",
    description: "Fails with every row it refused.",
    input: z.object({}),
    execute: () => {
      throw new ToolError("load_refused", longMessage, { retryable: true, data: { rows } });
    },
  }),
  defineTool({
    name: "db.count",
    description: "Answers a BigInt.",
    input: z.object({}),
    execute: () => ({ count: 12n }),
  }),
  defineTool({
    name: "db.graph",
    description: "Fails with a cycle in its data.",
    input: z.object({}),
    execute: () => {
      throw new ToolError("graph_broken", "No way out", { data: cyclic });
    },
  }),
  defineTool({ name: "db.ping", description: "Fine.", input: z.object({}), execute: () => ({ pong: true }) }),
]);

const tokensOfJson = (value: unknown) => countTokens(JSON.stringify(value));

describe("errorForModel: the error a model reads", () => {
  it("keeps a small error as it is, the same object", () => {
    const small = { code: "busy", message: "Try again", retryable: true, data: { after: 5 } };
    assert.equal(errorForModel(small, budget), small);
  });

  it("cuts a long message and large data to the budget, counting what it left out", () => {
    const whole = { code: "load_refused", message: longMessage, retryable: true, data: { rows } };
    const cut = errorForModel(whole, budget);
    assert.ok(tokensOfJson(cut) <= budget, `${tokensOfJson(cut)} tokens`);
    assert.equal(cut.code, "load_refused");
    assert.equal(cut.retryable, true);
    assert.equal(cut.data, undefined);
    const kept = cut.message.slice(0, -1);
    assert.ok(longMessage.startsWith(kept) && cut.message.endsWith("…"));
    assert.equal(kept.length + (cut.omitted?.messageCharacters ?? 0), longMessage.length);
    const dataText = JSON.stringify({ rows });
    assert.ok(cut.dataPreview !== undefined && dataText.startsWith(cut.dataPreview));
    assert.ok(cut.dataPreview.length > 1_000, "the preview holds a useful part");
    assert.equal(cut.dataPreview.length + (cut.omitted?.dataCharacters ?? 0), dataText.length);
  });

  it("keeps the data whole when only the message was long", () => {
    const cut = errorForModel({ code: "x", message: longMessage, data: { id: 7 } }, budget);
    assert.deepEqual(cut.data, { id: 7 });
    assert.ok(tokensOfJson(cut) <= budget);
  });

  it("names data JSON cannot write, with or without a budget", () => {
    for (const limit of [budget, false] as const) {
      const answer = errorForModel({ code: "x", message: "m", data: { n: 1n } }, limit);
      assert.equal(answer.data, undefined);
      assert.match(answer.omitted?.dataNotJson ?? "", /BigInt/);
      assert.doesNotThrow(() => JSON.stringify(answer));
    }
  });

  it("fits the budget whatever the sizes (500 random errors)", () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    for (let round = 0; round < 500; round += 1) {
      const limit = 1_500 + Math.floor(random() * 6_500);
      const message = "word ".repeat(Math.floor(random() ** 2 * 20_000));
      const data =
        random() < 0.2
          ? undefined
          : { items: Array.from({ length: Math.floor(random() ** 3 * 3_000) }, (_, i) => `item-${i}`) };
      const whole = { code: "c", message, retryable: random() < 0.5, ...(data ? { data } : {}) };
      const answer: ModelError = errorForModel(whole, limit);
      assert.ok(tokensOfJson(answer) <= limit, `round ${round}: ${tokensOfJson(answer)} > ${limit}`);
      if (tokensOfJson(whole) <= limit) assert.equal(answer, whole, `round ${round} cut a fitting error`);
    }
  });
});

describe("the adapters hand the model bounded, writable errors", () => {
  it("AI SDK: the model reads the cut error; the program's result keeps it whole", async () => {
    const aiTools = toAiSdkTools(tools, { resultBudget: budget });
    const execution = { toolCallId: "c1", messages: [], context: {} };
    const aiTool = aiTools.db__load as AiSdkTool;
    const output: unknown = await aiTool.execute!({}, execution);
    assert.deepEqual((output as { error: { data: unknown } }).error.data, { rows });
    const read = await aiTool.toModelOutput!({ toolCallId: "c1", input: {}, output });
    assert.equal(read.type, "error-json");
    assert.ok(tokensOfJson(read.value) <= budget, `${tokensOfJson(read.value)} tokens`);
    assert.equal((read.value as { code: string }).code, "load_refused");
  });

  it("AI SDK: a BigInt answer and cyclic error data are coded errors the model can read", async () => {
    const aiTools = toAiSdkTools(tools);
    const execution = { toolCallId: "c2", messages: [], context: {} };
    for (const [name, code] of [
      ["db__count", "invalid_output"],
      ["db__graph", "graph_broken"],
    ] as const) {
      const aiTool = aiTools[name] as AiSdkTool;
      const output: unknown = await aiTool.execute!({}, execution);
      const read = await aiTool.toModelOutput!({ toolCallId: "c2", input: {}, output });
      assert.equal(read.type, "error-json", name);
      assert.equal((read.value as { code: string }).code, code);
      assert.doesNotThrow(() => JSON.stringify(read.value));
    }
  });

  it("OpenAI: every call of a turn is answered, each within the budget", async () => {
    const calls = ["db__load", "db__count", "db__graph", "db__ping"].map((name, index) => ({
      id: `call_${index}`,
      type: "function" as const,
      function: { name, arguments: "{}" },
    }));
    const answers = await runChatToolCalls(tools, { tool_calls: calls }, { resultBudget: budget });
    assert.equal(answers.length, 4);
    const [load, count, graph, ping] = answers.map((answer) => JSON.parse(String(answer.content)));
    assert.ok(countTokens(String(answers[0]!.content)) <= budget);
    assert.equal(load.error.code, "load_refused");
    assert.equal(count.error.code, "invalid_output");
    assert.match(count.error.message, /not JSON: .*BigInt/);
    assert.equal(graph.error.code, "graph_broken");
    assert.match(graph.error.omitted.dataNotJson, /circular/);
    assert.deepEqual(ping, { pong: true });
  });

  it("LangChain: the message holds the cut error, the artifact the whole one", async () => {
    const [load, count] = toLangChainTools(tools, { resultBudget: budget });
    const call = (id: string, name: string) => ({ id, name, args: {}, type: "tool_call" as const });
    const failed = (await load!.invoke(call("l1", "db__load"))) as ToolMessage;
    assert.ok(failed instanceof ToolMessage);
    assert.equal(failed.status, "error");
    assert.ok(countTokens(String(failed.content)) <= budget, `${countTokens(String(failed.content))} tokens`);
    assert.deepEqual((failed.artifact as { data: unknown }).data, { rows });
    const notJson = (await count!.invoke(call("l2", "db__count"))) as ToolMessage;
    assert.equal(notJson.status, "error");
    assert.equal(JSON.parse(String(notJson.content)).error.code, "invalid_output");
  });

  it("MCP: a BigInt answer and cyclic error data come back as coded errors", async () => {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const server = createMcpServer(tools, { resultPages: false });
    await server.connect(serverSide);
    const client = new Client({ name: "test", version: "1.0.0" });
    await client.connect(clientSide);
    try {
      const count = await client.callTool({ name: "db.count", arguments: {} });
      assert.equal(count.isError, true);
      assert.match(JSON.stringify(count.content), /invalid_output: .*not JSON/);
      const graph = await client.callTool({ name: "db.graph", arguments: {} });
      assert.equal(graph.isError, true);
      const { error } = graph.structuredContent as { error: ModelError };
      assert.equal(error.code, "graph_broken");
      assert.match(error.omitted?.dataNotJson ?? "", /circular/);
    } finally {
      await client.close();
      await server.close();
    }
  });
});
