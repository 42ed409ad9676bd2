import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { z } from "zod";
import { controlFlowBrand } from "../errors/control-flow.ts";
import { defineTool } from "../tool/define-tool.ts";
import { createToolSet } from "../tool-set/create-tool-set.ts";
import { runChatToolCalls } from "./run-chat-tool-calls.ts";
import { runResponseToolCalls } from "./run-response-tool-calls.ts";

const pause = Object.assign(new Error("paused"), { [controlFlowBrand]: true });
const toolset = createToolSet([
  defineTool({
    name: "echo",
    description: "Echoes its text.",
    input: z.object({ text: z.string() }),
    execute: ({ text }) => text,
  }),
  defineTool({
    name: "pausing",
    description: "Pauses for a human.",
    input: z.object({}),
    execute: () => {
      throw pause;
    },
  }),
]);

describe("runChatToolCalls and runResponseToolCalls", () => {
  it("answer string outputs as they are and empty arguments as {}", async () => {
    const [message] = await runChatToolCalls(toolset, {
      tool_calls: [{ id: "c1", type: "function", function: { name: "echo", arguments: '{"text":"hi"}' } }],
    });
    assert.deepEqual(message, { role: "tool", tool_call_id: "c1", content: "hi" });
    const [output] = await runResponseToolCalls(toolset, [
      { type: "function_call", call_id: "c2", name: "echo", arguments: "" },
    ]);
    assert.equal(output?.call_id, "c2");
    assert.equal(JSON.parse(String(output?.output)).error.code, "invalid_input");
  });

  it("answer nothing for a message without tool calls", async () => {
    assert.deepEqual(await runChatToolCalls(toolset, { tool_calls: null }), []);
    assert.deepEqual(await runResponseToolCalls(toolset, { output: [] }), []);
  });

  it("let a control-flow throw pass through untouched", async () => {
    await assert.rejects(
      runChatToolCalls(toolset, {
        tool_calls: [{ id: "c3", type: "function", function: { name: "pausing", arguments: "{}" } }],
      }),
      (error) => error === pause,
    );
    await assert.rejects(
      runResponseToolCalls(toolset, [
        { type: "function_call", call_id: "c4", name: "pausing", arguments: "{}" },
      ]),
      (error) => error === pause,
    );
  });
});
