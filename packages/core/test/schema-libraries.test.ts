/**
 * Tools whose schemas come from the libraries users bring, not zod: ArkType (a Standard JSON Schema
 * of its own) and Valibot (through `@valibot/to-json-schema`'s `toStandardJsonSchema`). Each is
 * defined once and reaches a model the way a zod tool does: its JSON Schema in MCP's `tools/list`
 * and in the AI SDK's and OpenAI's tool definitions, its refusals as `invalid_input` with paths (each
 * library's own issue paths: ArkType's keys, Valibot's path items), its output through the AI SDK's
 * tool loop and the MCP SDK's client.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { Client } from "@modelcontextprotocol/client";
import { InMemoryTransport } from "@modelcontextprotocol/server";
import { toStandardJsonSchema } from "@valibot/to-json-schema";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { type } from "arktype";
import * as v from "valibot";
import { toAiSdkTools } from "../src/ai-sdk/index.ts";
import { createToolSet, defineTool } from "../src/index.ts";
import { serveMcpStdio } from "../src/mcp/index.ts";
import { toOpenAIChatTools } from "../src/openai/index.ts";
import { textStep, toolCallsStep } from "./support/mock-model-steps.ts";

const book = defineTool({
  name: "shelf.book",
  description: "Books a shelf slot.",
  input: type({ title: "string", copies: "number.integer >= 1", "tags?": "string[]" }),
  execute: ({ title, copies, tags }) => ({ title, copies, tags: tags ?? [] }),
});
const move = defineTool({
  name: "shelf.move",
  description: "Moves a book to a place.",
  input: toStandardJsonSchema(
    v.object({
      title: v.string(),
      to: v.object({ room: v.string(), shelf: v.pipe(v.number(), v.minValue(0)) }),
    }),
  ),
  execute: ({ title, to }) => `${title} → ${to.room}/${to.shelf}`,
});
const toolset = createToolSet([book, move]);
/** Arguments of the wrong types, as a model may send them. */
const wrong = (args: unknown) => args as never;

it("an ArkType and a Valibot tool refuse bad input with each issue's path, and run good input", async () => {
  const booked = await toolset.call("shelf.book", { title: "Dune", copies: 2 });
  assert.deepEqual(booked, { ok: true, output: { title: "Dune", copies: 2, tags: [] } });
  const badBook = await toolset.call("shelf.book", wrong({ title: "Dune", copies: 0.5, tags: ["sf", 3] }));
  assert.equal(!badBook.ok && badBook.error.code, "invalid_input");
  const bookIssues = (!badBook.ok ? badBook.error.data : undefined) as { issues: { path: unknown[] }[] };
  assert.deepEqual(bookIssues.issues.map((issue) => issue.path).sort(), [["copies"], ["tags", 1]]);

  assert.deepEqual(await toolset.call("shelf.move", { title: "Dune", to: { room: "attic", shelf: 3 } }), {
    ok: true,
    output: "Dune → attic/3",
  });
  const badMove = await toolset.call("shelf.move", wrong({ title: "Dune", to: { room: 7, shelf: -1 } }));
  assert.equal(!badMove.ok && badMove.error.code, "invalid_input");
  const moveIssues = (!badMove.ok ? badMove.error.data : undefined) as { issues: { path: unknown[] }[] };
  assert.deepEqual(moveIssues.issues.map((issue) => issue.path).sort(), [
    ["to", "room"],
    ["to", "shelf"],
  ]);
});

it("their JSON Schemas reach MCP's tools/list and OpenAI's definitions, and an MCP client calls them", async () => {
  const definitions = toOpenAIChatTools(toolset);
  const parameters = (name: string) =>
    definitions.find((tool) => tool.type === "function" && tool.function.name === name)?.function
      .parameters as { properties: Record<string, unknown>; required: string[] };
  assert.deepEqual(parameters("shelf__book").required, ["copies", "title"].sort());
  assert.deepEqual(Object.keys(parameters("shelf__move").properties), ["title", "to"]);

  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const served = serveMcpStdio(toolset, { transport: serverSide });
  const client = new Client({ name: "schema-libraries", version: "1.0.0" });
  try {
    await client.connect(clientSide);
    const { tools } = await client.listTools();
    const listed = tools.find((tool) => tool.name === "shelf.move")?.inputSchema as unknown as {
      properties: { to: { properties: { shelf: { minimum?: number } } } };
    };
    assert.equal(listed.properties.to.properties.shelf.minimum, 0);
    const refused = await client.callTool({ name: "shelf.book", arguments: { title: "Dune", copies: 0 } });
    assert.equal(refused.isError, true);
    assert.match(JSON.stringify(refused.content), /invalid_input/);
    const moved = await client.callTool({
      name: "shelf.move",
      arguments: { title: "Emma", to: { room: "hall", shelf: 1 } },
    });
    assert.match(JSON.stringify(moved.content), /Emma → hall\/1/);
  } finally {
    await client.close();
    await served.close();
  }
});

it("the AI SDK's tool loop runs them and shows the model a refusal it can correct", async () => {
  const model = new MockLanguageModelV4({
    doGenerate: [
      toolCallsStep(["call-1", "shelf__book", { title: "Dune", copies: "two" }]),
      toolCallsStep(["call-2", "shelf__book", { title: "Dune", copies: 2 }]),
      textStep("booked"),
    ],
  });
  const result = await generateText({
    model,
    tools: toAiSdkTools(toolset),
    prompt: "Book two copies of Dune",
    stopWhen: stepCountIs(3),
  });
  const [first, second] = result.steps.map((step) =>
    step.content.find((part) => part.type.startsWith("tool-")),
  );
  assert.match(JSON.stringify(first), /invalid_input|copies/);
  assert.deepEqual(result.steps[1]?.toolResults[0]?.output, { title: "Dune", copies: 2, tags: [] });
  assert.ok(second !== undefined);
});
