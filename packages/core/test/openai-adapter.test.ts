/** The `/openai` adapter against the real `openai` client, talking HTTP to a local wire-format server. */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import OpenAI from "openai";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions/completions";
import type { ResponseInputItem } from "openai/resources/responses/responses";
import { z } from "zod";
import { createToolSet, defineTool } from "../src/index.ts";
import {
  runChatToolCalls,
  runResponseToolCalls,
  toOpenAIChatTools,
  toOpenAIResponseTools,
} from "../src/openai/index.ts";
import { withoutDialect } from "../src/schema/schema.ts";
import { type ScriptedOpenAIServer, startScriptedOpenAIServer } from "./support/scripted-openai-server.ts";

const executed: { callId: string; a: number; b: number }[] = [];
const add = defineTool({
  name: "math.add",
  description: "Adds two numbers.",
  input: z.object({ a: z.number(), b: z.number() }),
  output: z.object({ sum: z.number() }),
  execute: ({ a, b }, context) => {
    executed.push({ callId: context.callId, a, b });
    return { sum: a + b };
  },
});
const toolset = createToolSet([add]);

describe("@tackle/core/openai with the real openai client", () => {
  let server: ScriptedOpenAIServer;
  let client: OpenAI;
  before(async () => {
    server = await startScriptedOpenAIServer([
      { name: "math__add", arguments: '{"a":2,"b":3}' },
      { name: "math__add", arguments: '{"a":"two"}' },
      { name: "math__add", arguments: "{not json" },
      { name: "math__sub", arguments: "{}" },
    ]);
    client = new OpenAI({ apiKey: "test-key", baseURL: server.baseURL, maxRetries: 0 });
  });
  after(() => server.close());

  it("runs a two-turn chat-completions tool loop", async () => {
    executed.length = 0;
    const tools = toOpenAIChatTools(toolset);
    const messages: ChatCompletionMessageParam[] = [{ role: "user", content: "What is 2 + 3?" }];
    const first = await client.chat.completions.create({ model: "scripted", messages, tools });
    const assistant = first.choices[0]?.message;
    assert.ok(assistant?.tool_calls?.length === 4);
    const toolMessages = await runChatToolCalls(toolset, assistant);
    messages.push(assistant, ...toolMessages);
    const second = await client.chat.completions.create({ model: "scripted", messages, tools });

    // The definitions reached the wire under model-safe names with the derived JSON Schema, then the
    // paging tool of answers cut to the budget (ADR 0532).
    const sent = server.requests.at(-2)?.body.tools as { function: { name: string } }[];
    assert.deepEqual(sent.slice(0, 1), [
      {
        type: "function",
        function: {
          name: "math__add",
          description: "Adds two numbers.",
          parameters: withoutDialect(add.inputJsonSchema),
        },
      },
    ]);
    assert.deepEqual(
      sent.slice(1).map((tool) => tool.function.name),
      ["tackle_result_page"],
    );
    // The tool ran once, for the one valid call, under the model's call id.
    assert.deepEqual(executed, [{ callId: assistant.tool_calls[0]?.id, a: 2, b: 3 }]);
    assert.deepEqual(
      toolMessages.map((message) => message.tool_call_id),
      assistant.tool_calls.map((call) => call.id),
    );
    const [ok, invalid, unparsable, unknown] = toolMessages.map((message) =>
      JSON.parse(String(message.content)),
    );
    assert.deepEqual(ok, { sum: 5 });
    assert.equal(invalid.error.code, "invalid_input");
    assert.deepEqual(
      invalid.error.data.issues.map((issue: { path: unknown[] }) => issue.path),
      [["a"], ["b"]],
    );
    assert.equal(unparsable.error.code, "invalid_input");
    assert.match(unparsable.error.message, /not valid JSON/);
    assert.equal(unknown.error.code, "unknown_tool");
    assert.deepEqual(unknown.error.data.available, ["math.add"]);
    // The second turn's request carried the tool messages, and the model's answer quotes the result.
    assert.match(second.choices[0]?.message.content ?? "", /\{"sum":5\}/);
  });

  it("runs a two-turn responses tool loop", async () => {
    executed.length = 0;
    const tools = toOpenAIResponseTools(toolset);
    const first = await client.responses.create({ model: "scripted", input: "What is 2 + 3?", tools });
    const outputs = await runResponseToolCalls(toolset, first);
    assert.equal(outputs.length, 4);
    const input: ResponseInputItem[] = [
      { role: "user", content: "What is 2 + 3?" },
      ...(first.output as ResponseInputItem[]),
      ...outputs,
    ];
    const second = await client.responses.create({ model: "scripted", input, tools });

    const sent = server.requests.at(-2)?.body.tools as { name: string }[];
    assert.deepEqual(sent.slice(0, 1), [
      {
        type: "function",
        name: "math__add",
        description: "Adds two numbers.",
        parameters: withoutDialect(add.inputJsonSchema),
        strict: false,
      },
    ]);
    assert.deepEqual(
      sent.slice(1).map((tool) => tool.name),
      ["tackle_result_page"],
    );
    const firstCall = first.output[0];
    assert.ok(firstCall?.type === "function_call");
    assert.deepEqual(executed, [{ callId: firstCall.call_id, a: 2, b: 3 }]);
    assert.equal(outputs[0]?.call_id, firstCall.call_id);
    assert.deepEqual(JSON.parse(String(outputs[0]?.output)), { sum: 5 });
    assert.equal(JSON.parse(String(outputs[1]?.output)).error.code, "invalid_input");
    assert.equal(JSON.parse(String(outputs[3]?.output)).error.code, "unknown_tool");
    assert.match(second.output_text, /\{"sum":5\}/);
  });
});
