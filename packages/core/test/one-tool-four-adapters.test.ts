/**
 * One tool, defined once, run through all four adapters with the real SDK objects: the AI SDK's
 * generateText (driven by its mock model, the only stand-in: a hosted LLM), the openai client over
 * HTTP to a local wire-format server, an MCP client and server from the v2 SDK, and LangChain's own
 * tool invocation. Each run executes the same handler and yields the same output.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { AIMessage, ToolMessage } from "@langchain/core/messages";
import { Client } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import OpenAI from "openai";
import { z } from "zod";
import { toAiSdkTools } from "../src/ai-sdk/index.ts";
import { createToolSet, defineTool } from "../src/index.ts";
import { toLangChainTools } from "../src/langchain/index.ts";
import { serveMcpStdio, toolSetFromMcp } from "../src/mcp/index.ts";
import { runChatToolCalls, toOpenAIChatTools } from "../src/openai/index.ts";
import { textStep, toolCallsStep } from "./support/mock-model-steps.ts";
import { startScriptedOpenAIServer } from "./support/scripted-openai-server.ts";

const executions: { city: string; callId: string }[] = [];
const weather = defineTool({
  name: "weather.current",
  description: "Current temperature of a city.",
  input: z.object({ city: z.string() }),
  output: z.object({ city: z.string(), celsius: z.number() }),
  execute: ({ city }, context) => {
    executions.push({ city, callId: context.callId });
    return { city, celsius: city.length };
  },
});
const toolset = createToolSet([weather]);
const expected = { city: "Izmir", celsius: 5 };
it("one tool defined once runs through the AI SDK, OpenAI, MCP and LangChain", async () => {
  // AI SDK: a generateText tool loop.
  const model = new MockLanguageModelV4({
    doGenerate: [toolCallsStep(["ai-1", "weather__current", { city: "Izmir" }]), textStep("done")],
  });
  const aiSdk = await generateText({
    model,
    tools: toAiSdkTools(toolset),
    prompt: "Weather in Izmir?",
    stopWhen: stepCountIs(2),
  });
  const aiSdkOutput = aiSdk.steps[0]?.toolResults[0]?.output;

  // OpenAI: the real client, over HTTP, to a server speaking the chat-completions wire format.
  const wire = await startScriptedOpenAIServer([{ name: "weather__current", arguments: '{"city":"Izmir"}' }]);
  let openAIOutput: unknown;
  try {
    const client = new OpenAI({ apiKey: "test-key", baseURL: wire.baseURL, maxRetries: 0 });
    const completion = await client.chat.completions.create({
      model: "scripted",
      messages: [{ role: "user", content: "Weather in Izmir?" }],
      tools: toOpenAIChatTools(toolset),
    });
    const message = completion.choices[0]?.message;
    assert.ok(message !== undefined);
    const [toolMessage] = await runChatToolCalls(toolset, message);
    openAIOutput = JSON.parse(String(toolMessage?.content));
  } finally {
    await wire.close();
  }

  // MCP: the tool set served by the v2 SDK, called through its client, both as raw MCP and as a tool set.
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const served = serveMcpStdio(toolset, { transport: serverSide });
  const mcpClient = new Client(
    { name: "test", version: "0.1.0" },
    { versionNegotiation: { mode: { pin: "2026-07-28" } } },
  );
  let mcpOutput: unknown;
  let mcpToolSetOutput: unknown;
  try {
    await mcpClient.connect(clientSide);
    mcpOutput = (await mcpClient.callTool({ name: "weather.current", arguments: { city: "Izmir" } }))
      .structuredContent;
    mcpToolSetOutput = await (await toolSetFromMcp(mcpClient)).invoke("weather.current", { city: "Izmir" });
  } finally {
    await mcpClient.close();
    await served.close();
  }

  // LangChain: the structured tool answers a model's ToolCall with a ToolMessage.
  const [langChainTool] = toLangChainTools(toolset);
  const call = new AIMessage({
    content: "",
    tool_calls: [{ type: "tool_call", id: "lc-1", name: "weather__current", args: { city: "Izmir" } }],
  }).tool_calls?.[0];
  assert.ok(langChainTool !== undefined && call !== undefined);
  const toolMessage = await langChainTool.invoke(call);
  assert.ok(toolMessage instanceof ToolMessage);
  const langChainOutput = JSON.parse(String(toolMessage.content));

  for (const output of [aiSdkOutput, openAIOutput, mcpOutput, mcpToolSetOutput, langChainOutput]) {
    assert.deepEqual(output, expected);
  }
  assert.equal(executions.length, 5);
  assert.ok(executions.every((execution) => execution.city === "Izmir"));
  assert.equal(executions[0]?.callId, "ai-1");
  assert.match(executions[1]?.callId ?? "", /^call_/);
  assert.equal(executions[4]?.callId, "lc-1");
});
