// The tools, resources and prompts the public MCP conformance suite asks for, as a Tackle bundle served
// only by its test. The suite calls fixed names (test_simple_text, test_simple_prompt, …); served as
// module "test" they are test.simple_text and test.simple_prompt, and the test's proxy maps one spelling
// to the other. Resources, prompts and completion come through the module's `mcp` seat tools
// (mcp.resources, mcp.read, mcp.prompts, mcp.prompt, mcp.complete), as any module's do.
import { defineTool, jsonSchema, ToolError, toolContent } from "@tackle/core";
import { z } from "zod";

const pixel =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const wav = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";
const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const none = z.object({});

/** Asks the client for a form; without a client that can, a coded error (the suite's note says so). */
async function elicit(context, message, requestedSchema) {
  if (context.client?.elicit === undefined) {
    throw new ToolError("unsupported", "The client does not support elicitation");
  }
  return context.client.elicit({ message, requestedSchema }, { signal: context.signal });
}

const resources = [
  {
    uri: "test://static-text",
    name: "static-text",
    description: "A static text resource",
    mimeType: "text/plain",
  },
  { uri: "test://static-binary", name: "static-binary", description: "A static PNG", mimeType: "image/png" },
  {
    uri: "test://watched-resource",
    name: "watched-resource",
    description: "A resource to subscribe to",
    mimeType: "text/plain",
  },
];
const resourceTemplates = [
  {
    uriTemplate: "test://template/{id}/data",
    name: "template-data",
    description: "Data for an id",
    mimeType: "application/json",
  },
];
const prompts = [
  { name: "simple_prompt", description: "A prompt without arguments" },
  {
    name: "prompt_with_arguments",
    description: "A prompt with two arguments",
    arguments: [
      { name: "arg1", description: "First test argument", required: true },
      { name: "arg2", description: "Second test argument", required: true },
    ],
  },
  {
    name: "prompt_with_embedded_resource",
    description: "A prompt that embeds a resource",
    arguments: [{ name: "resourceUri", description: "URI of the resource to embed", required: true }],
  },
  { name: "prompt_with_image", description: "A prompt with an image" },
];
const text = (value) => ({ role: "user", content: { type: "text", text: value } });

function promptMessages(name, args) {
  switch (name) {
    case "simple_prompt":
      return [text("This is a simple prompt for testing.")];
    case "prompt_with_arguments":
      return [text(`Prompt with arguments: arg1='${args.arg1}', arg2='${args.arg2}'`)];
    case "prompt_with_embedded_resource":
      return [
        {
          role: "user",
          content: {
            type: "resource",
            resource: {
              uri: args.resourceUri,
              mimeType: "text/plain",
              text: "Embedded resource content for testing.",
            },
          },
        },
        text("Please process the embedded resource above."),
      ];
    case "prompt_with_image":
      return [
        { role: "user", content: { type: "image", data: pixel, mimeType: "image/png" } },
        text("Please analyze the image above."),
      ];
    default:
      throw new ToolError("invalid_input", `Unknown prompt "${name}"`);
  }
}

const seat = [
  defineTool({
    name: "mcp.resources",
    description: "This module's resources and resource templates.",
    input: none,
    execute: () => ({ resources, resourceTemplates }),
  }),
  defineTool({
    name: "mcp.read",
    description: "Reads one of this module's resources.",
    input: z.object({ uri: z.string() }),
    execute: ({ uri }) => {
      if (uri === "test://static-text" || uri === "test://watched-resource") {
        return {
          contents: [
            { uri, mimeType: "text/plain", text: "This is the content of the static text resource." },
          ],
        };
      }
      if (uri === "test://static-binary") return { contents: [{ uri, mimeType: "image/png", blob: pixel }] };
      const match = /^test:\/\/template\/([^/]+)\/data$/.exec(uri);
      if (match !== null) {
        const id = match[1];
        return {
          contents: [
            {
              uri,
              mimeType: "application/json",
              text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
            },
          ],
        };
      }
      throw new ToolError("not_found", `No resource ${uri}`);
    },
  }),
  defineTool({
    name: "mcp.prompts",
    description: "This module's prompts.",
    input: none,
    execute: () => ({ prompts }),
  }),
  defineTool({
    name: "mcp.prompt",
    description: "One of this module's prompts, with its arguments.",
    input: z.object({ name: z.string(), arguments: z.record(z.string(), z.string()).default({}) }),
    execute: ({ name, arguments: args }) => ({ messages: promptMessages(name, args) }),
  }),
  defineTool({
    name: "mcp.complete",
    description: "Completes a prompt's arguments and a template's variables.",
    input: z.object({
      ref: z.object({ type: z.string() }).loose(),
      argument: z.object({ name: z.string(), value: z.string() }),
    }),
    execute: ({ argument }) => {
      const known = {
        arg1: ["test-one", "test-two", "other"],
        arg2: ["world", "wide"],
        id: ["123", "124", "200"],
      };
      return { values: (known[argument.name] ?? []).filter((value) => value.startsWith(argument.value)) };
    },
  }),
];

export default [
  ...seat,
  defineTool({
    name: "sampling",
    description: "Asks the client's model to answer a prompt.",
    input: z.object({ prompt: z.string() }),
    async execute({ prompt }, context) {
      if (context.client?.sample === undefined) {
        throw new ToolError("unsupported", "The client does not support sampling");
      }
      const answer = await context.client.sample(
        { messages: [{ role: "user", content: { type: "text", text: prompt } }], maxTokens: 100 },
        { signal: context.signal },
      );
      return toolContent([{ type: "text", text: `LLM response: ${answer.content?.text ?? ""}` }]);
    },
  }),
  defineTool({
    name: "elicitation",
    description: "Asks the person at the client for a username and an email.",
    input: z.object({ message: z.string() }),
    async execute({ message }, context) {
      const answer = await elicit(context, message, {
        type: "object",
        properties: {
          username: { type: "string", description: "User's response" },
          email: { type: "string", description: "User's email address" },
        },
        required: ["username", "email"],
      });
      return toolContent([{ type: "text", text: `User response: ${JSON.stringify(answer)}` }]);
    },
  }),
  defineTool({
    name: "elicitation_sep1034_defaults",
    description: "Asks for a form whose fields have defaults.",
    input: none,
    async execute(_input, context) {
      const answer = await elicit(context, "Please review and update the form fields with defaults", {
        type: "object",
        properties: {
          name: { type: "string", description: "User name", default: "John Doe" },
          age: { type: "integer", description: "User age", default: 30 },
          score: { type: "number", description: "User score", default: 95.5 },
          status: {
            type: "string",
            description: "User status",
            enum: ["active", "inactive", "pending"],
            default: "active",
          },
          verified: { type: "boolean", description: "Verification status", default: true },
        },
        required: [],
      });
      return toolContent([
        {
          type: "text",
          text: `Elicitation completed: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`,
        },
      ]);
    },
  }),
  defineTool({
    name: "elicitation_sep1330_enums",
    description: "Asks for a form with every kind of enum field.",
    input: none,
    async execute(_input, context) {
      const answer = await elicit(context, "Please select options from the enum fields", {
        type: "object",
        properties: {
          untitledSingle: {
            type: "string",
            description: "Select one option",
            enum: ["option1", "option2", "option3"],
          },
          titledSingle: {
            type: "string",
            description: "Select one option with titles",
            oneOf: [
              { const: "value1", title: "First Option" },
              { const: "value2", title: "Second Option" },
              { const: "value3", title: "Third Option" },
            ],
          },
          legacyEnum: {
            type: "string",
            description: "Select one option (legacy)",
            enum: ["opt1", "opt2", "opt3"],
            enumNames: ["Option One", "Option Two", "Option Three"],
          },
          untitledMulti: {
            type: "array",
            description: "Select multiple options",
            minItems: 1,
            maxItems: 3,
            items: { type: "string", enum: ["option1", "option2", "option3"] },
          },
          titledMulti: {
            type: "array",
            description: "Select multiple options with titles",
            minItems: 1,
            maxItems: 3,
            items: {
              anyOf: [
                { const: "value1", title: "First Choice" },
                { const: "value2", title: "Second Choice" },
                { const: "value3", title: "Third Choice" },
              ],
            },
          },
        },
        required: [],
      });
      return toolContent([
        {
          type: "text",
          text: `Elicitation completed: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`,
        },
      ]);
    },
  }),
  defineTool({
    name: "simple_text",
    description: "Returns simple text content.",
    input: none,
    execute: () => toolContent([{ type: "text", text: "This is a simple text response for testing." }]),
  }),
  defineTool({
    name: "image_content",
    description: "Returns image content.",
    input: none,
    execute: () => toolContent([{ type: "image", data: pixel, mimeType: "image/png" }]),
  }),
  defineTool({
    name: "audio_content",
    description: "Returns audio content.",
    input: none,
    execute: () => toolContent([{ type: "audio", data: wav, mimeType: "audio/wav" }]),
  }),
  defineTool({
    name: "embedded_resource",
    description: "Returns an embedded resource.",
    input: none,
    execute: () =>
      toolContent([
        {
          type: "resource",
          resource: {
            uri: "test://embedded-resource",
            mimeType: "text/plain",
            text: "This is an embedded resource content.",
          },
        },
      ]),
  }),
  defineTool({
    name: "multiple_content_types",
    description: "Returns text, an image and a resource.",
    input: none,
    execute: () =>
      toolContent([
        { type: "text", text: "Multiple content types test:" },
        { type: "image", data: pixel, mimeType: "image/png" },
        {
          type: "resource",
          resource: {
            uri: "test://mixed-content-resource",
            mimeType: "application/json",
            text: '{"test":"data","value":123}',
          },
        },
      ]),
  }),
  defineTool({
    name: "tool_with_logging",
    description: "Sends log messages while it runs.",
    input: none,
    async execute(_input, context) {
      context.logger.info("Tool execution started");
      await wait(50);
      context.logger.info("Tool processing data");
      await wait(50);
      context.logger.info("Tool execution completed");
      return toolContent([{ type: "text", text: "Tool with logging executed successfully" }]);
    },
  }),
  defineTool({
    name: "tool_with_progress",
    description: "Reports progress while it runs.",
    input: none,
    async execute(_input, context) {
      for (const step of [0, 50, 100]) {
        context.progress(step, 100, `Completed step ${step}`);
        await wait(50);
      }
      return toolContent([{ type: "text", text: "Progress test completed" }]);
    },
  }),
  defineTool({
    name: "error_handling",
    description: "Always fails.",
    input: none,
    execute: () => {
      throw new Error("This tool intentionally returns an error for testing");
    },
  }),
  defineTool({
    name: "reconnection",
    description: "Answers after a moment (for the SSE scenarios).",
    input: none,
    async execute() {
      await wait(100);
      return toolContent([{ type: "text", text: "Reconnection test completed" }]);
    },
  }),
  defineTool({
    name: "json_schema_2020_12_tool",
    description: "Tool with JSON Schema 2020-12 features",
    input: jsonSchema({
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      $defs: {
        address: { type: "object", properties: { street: { type: "string" }, city: { type: "string" } } },
      },
      properties: { name: { type: "string" }, address: { $ref: "#/$defs/address" } },
      additionalProperties: false,
    }),
    execute: (input) => ({ received: input }),
  }),
];
