/**
 * Tools defined once (./tools.ts), called through every adapter of @tackle/core:
 *   1. the AI SDK's generateText, driven by its mock model (no hosted LLM here, so the model is scripted);
 *   2. the real `openai` client, over HTTP to a local server speaking the OpenAI wire format (scripted);
 *   3. an MCP client and server from the MCP SDK v2, connected in-process, at both protocol revisions;
 *   4. LangChain's own tool invocation with a model-style ToolCall.
 *
 *   node_modules/.bin/node --conditions=@tackle/source examples/adapters/all-adapters.ts
 */
import { ToolMessage } from "@langchain/core/messages";
import { Client } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { toAiSdkTools } from "@tackle/core/ai-sdk";
import { toLangChainTools } from "@tackle/core/langchain";
import { serveMcpStdio, toolSetFromMcp } from "@tackle/core/mcp";
import { runChatToolCalls, toOpenAIChatTools } from "@tackle/core/openai";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import OpenAI from "openai";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions/completions";
import { textStep, toolCallsStep } from "../../packages/core/test/support/mock-model-steps.ts";
import { startScriptedOpenAIServer } from "../../packages/core/test/support/scripted-openai-server.ts";
import { toolset } from "./tools.ts";

/** One readable line per value: a coded error as `error <code>: <message>`, anything else as JSON. */
function show(value: unknown): string {
  const parsed = typeof value === "string" && value.startsWith("{") ? JSON.parse(value) : value;
  const error = (parsed as { error?: { code?: string; message?: string } } | null)?.error;
  if (typeof error?.code === "string") return `error ${error.code}: ${error.message}`;
  if (
    typeof parsed === "object" &&
    parsed !== null &&
    "ok" in parsed &&
    parsed.ok === true &&
    "output" in parsed
  ) {
    return `ok ${JSON.stringify(parsed.output)}`;
  }
  return typeof parsed === "string" ? parsed : JSON.stringify(parsed);
}

const shorten = (text: string) => (text.length > 90 ? `${text.slice(0, 87)}...` : text);

console.log(`Tools, defined once: ${toolset.names.join(", ")}\n`);

// 1. AI SDK ----------------------------------------------------------------------------------------
console.log("== AI SDK: generateText with a scripted mock model");
// The model is scripted (a mock from `ai/test`): it asks for two weather calls, then answers.
const model = new MockLanguageModelV4({
  doGenerate: [
    toolCallsStep(
      ["ai-1", "weather__current", { city: "Izmir" }],
      ["ai-2", "weather__current", { city: "Atlantis" }],
    ),
    textStep("It is 24 °C in Izmir; Atlantis has no station."),
  ],
});
const aiSdk = await generateText({
  model,
  tools: toAiSdkTools(toolset),
  prompt: "How warm is it in Izmir and in Atlantis?",
  stopWhen: stepCountIs(3),
});
for (const result of aiSdk.steps[0]?.toolResults ?? []) {
  console.log(`  tool ${result.toolName}(${show(result.input)}) -> ${show(result.output)}`);
}
console.log(`  model's answer: ${aiSdk.text}\n`);

// 2. OpenAI ----------------------------------------------------------------------------------------
console.log("== OpenAI: chat completions, real client, local wire-format server");
const wire = await startScriptedOpenAIServer([
  { name: "units__celsius_to_fahrenheit", arguments: '{"celsius":24}' },
  { name: "units__celsius_to_fahrenheit", arguments: '{"celsius":"warm"}' },
]);
try {
  const client = new OpenAI({ apiKey: "not-needed-locally", baseURL: wire.baseURL, maxRetries: 0 });
  const tools = toOpenAIChatTools(toolset);
  const messages: ChatCompletionMessageParam[] = [{ role: "user", content: "24 °C in °F?" }];
  const first = await client.chat.completions.create({ model: "scripted", messages, tools });
  const assistant = first.choices[0]?.message;
  if (assistant === undefined) throw new Error("the scripted server sent no choice");
  const toolMessages = await runChatToolCalls(toolset, assistant);
  for (const [index, call] of (assistant.tool_calls ?? []).entries()) {
    const name = call.type === "function" ? call.function.name : call.custom.name;
    const args = call.type === "function" ? call.function.arguments : call.custom.input;
    console.log(`  tool ${name}(${args}) -> ${show(toolMessages[index]?.content)}`);
  }
  messages.push(assistant, ...toolMessages);
  const second = await client.chat.completions.create({ model: "scripted", messages, tools });
  console.log(
    `  model's second turn, after reading the tool messages: ${shorten(second.choices[0]?.message.content ?? "")}\n`,
  );
} finally {
  await wire.close();
}

// 3. MCP -------------------------------------------------------------------------------------------
for (const mode of ["legacy", { pin: "2026-07-28" }] as const) {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const served = serveMcpStdio(toolset, { name: "example-tools", transport: serverSide });
  const client = new Client({ name: "example", version: "0.1.0" }, { versionNegotiation: { mode } });
  try {
    await client.connect(clientSide);
    console.log(`== MCP: SDK v2 client and server, protocol ${client.getNegotiatedProtocolVersion()}`);
    const { tools } = await client.listTools();
    console.log(`  tools/list -> ${tools.map((tool) => tool.name).join(", ")}`);
    const result = await client.callTool({ name: "weather.current", arguments: { city: "Oslo" } });
    console.log(`  tools/call weather.current({"city":"Oslo"}) -> ${show(result.structuredContent)}`);
    const failed = await client.callTool({ name: "weather.current", arguments: { city: "Atlantis" } });
    console.log(
      `  tools/call weather.current({"city":"Atlantis"}) -> isError ${failed.isError}, ${show(failed.structuredContent)}`,
    );
    const remote = await toolSetFromMcp(client, { prefix: "remote" });
    const converted = await remote.call("remote.units.celsius_to_fahrenheit", { celsius: 3 });
    console.log(`  as a tool set: remote.units.celsius_to_fahrenheit({"celsius":3}) -> ${show(converted)}\n`);
  } finally {
    await client.close();
    await served.close();
  }
}

// 4. LangChain -------------------------------------------------------------------------------------
console.log("== LangChain: structured tools invoked with a ToolCall");
const langChainTools = new Map(toLangChainTools(toolset).map((tool) => [tool.name, tool]));
for (const toolCall of [
  { type: "tool_call" as const, id: "lc-1", name: "weather__current", args: { city: "Lima" } },
  { type: "tool_call" as const, id: "lc-2", name: "weather__current", args: { town: "Lima" } },
]) {
  const message = await langChainTools.get(toolCall.name)?.invoke(toolCall);
  if (!(message instanceof ToolMessage))
    throw new Error("LangChain answered a ToolCall without a ToolMessage");
  console.log(
    `  tool ${toolCall.name}(${show(toolCall.args)}) -> ToolMessage ${message.status}, ${show(message.content)}`,
  );
}
