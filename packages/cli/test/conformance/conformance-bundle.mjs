// The tools the public MCP conformance suite calls, as a Tackle bundle served only by its test.
// The suite calls fixed names (test_simple_text, …); served as module "test" they are test.simple_text,
// and the test's proxy maps one spelling to the other.
import { defineTool, jsonSchema, toolContent } from "@tackle/core";
import { z } from "zod";

const pixel =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const wav = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";
const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const none = z.object({});

export default [
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
